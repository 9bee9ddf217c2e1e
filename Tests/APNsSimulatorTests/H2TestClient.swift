import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Locking
import CallpushTestSupport

/// A response seen by ``H2TestClient``.
struct H2Response: Sendable {
    var status: Int
    var headers: [String: String]
    var body: String

    /// `reason` of the JSON body, if any.
    var reason: String? {
        guard let data = body.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return object["reason"] as? String
    }

    /// `timestamp` of the JSON body, if any.
    var timestamp: Int64? {
        guard let data = body.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return (object["timestamp"] as? Int).map(Int64.init)
    }
}

struct H2TestClientError: Error, CustomStringConvertible {
    var description: String
}

/// A GOAWAY seen by the client.
struct ReceivedGoAway: Sendable {
    var lastStreamID: Int
    var errorCode: HTTP2ErrorCode
    var debugData: String
}

/// A deliberately small HTTP/2 + TLS client for the simulator tests (independent of the APNs client module):
/// verifies the server certificate against a given CA and host name, speaks h2 via ALPN.
final class H2TestClient: Sendable {
    let channel: any Channel
    private let multiplexer: NIOLoopBound<NIOHTTP2Handler.StreamMultiplexer>
    private let recorder: RootFrameRecorder

    private init(channel: any Channel, multiplexer: NIOLoopBound<NIOHTTP2Handler.StreamMultiplexer>, recorder: RootFrameRecorder) {
        self.channel = channel
        self.multiplexer = multiplexer
        self.recorder = recorder
    }

    /// Connects to `host:port`, trusting `caPEM`, optionally presenting a client certificate.
    static func connect(
        host: String = "127.0.0.1",
        serverName: String? = nil,
        port: Int,
        caPEM: String,
        clientCertificate: (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)? = nil
    ) async throws -> H2TestClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(caPEM.utf8)))
        tls.applicationProtocols = ["h2"]
        tls.certificateVerification = .fullVerification
        if let clientCertificate {
            tls.certificateChain = clientCertificate.chain.map { .certificate($0) }
            tls.privateKey = .privateKey(clientCertificate.key)
        }
        let sslContext = try NIOSSLContext(configuration: tls)
        let recorder = RootFrameRecorder()
        let serverHostname = serverName ?? (host.first?.isNumber == true || host.contains(":") ? nil : host)
        // TLS, HTTP/2 and the recorder go in together before connecting, so no early server frame is missed.
        let (channel, multiplexer) = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname))
                    let multiplexer = try sync.configureHTTP2Pipeline(
                        mode: .client,
                        connectionConfiguration: .init(),
                        streamConfiguration: .init()
                    ) { stream in
                        stream.close()
                    }
                    try sync.addHandler(recorder)
                    return (channel, NIOLoopBound(multiplexer, eventLoop: channel.eventLoop))
                }
            }
        return H2TestClient(channel: channel, multiplexer: multiplexer, recorder: recorder)
    }

    /// GOAWAY frames received so far.
    var goAways: [ReceivedGoAway] { recorder.goAways }

    /// The last MAX_CONCURRENT_STREAMS the server announced.
    var maxConcurrentStreams: Int? { recorder.maxConcurrentStreams }

    /// Sends one request; fails on reset, connection loss or after `timeout`.
    func send(
        method: String = "POST",
        path: String,
        headers: [(String, String)],
        body: String?,
        timeout: TimeAmount = .seconds(5)
    ) async throws -> H2Response {
        var requestHeaders = HPACKHeaders()
        requestHeaders.add(name: ":method", value: method)
        requestHeaders.add(name: ":scheme", value: "https")
        requestHeaders.add(name: ":authority", value: "localhost")
        requestHeaders.add(name: ":path", value: path)
        for (name, value) in headers { requestHeaders.add(name: name, value: value) }
        let loop = channel.eventLoop
        let promise = loop.makePromise(of: H2Response.self)
        let multiplexer = self.multiplexer
        let headersToSend = requestHeaders
        loop.execute {
            let streamPromise = loop.makePromise(of: (any Channel).self)
            multiplexer.value.createStreamChannel(promise: streamPromise) { stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandler(ResponseCollector(promise: promise))
                }
            }
            streamPromise.futureResult.whenComplete { result in
                switch result {
                case .failure(let error):
                    promise.fail(error)
                case .success(let stream):
                    let hasBody = body != nil
                    stream.write(HTTP2Frame.FramePayload.headers(.init(headers: headersToSend, endStream: !hasBody)), promise: nil)
                    if let body {
                        var buffer = stream.allocator.buffer(capacity: body.utf8.count)
                        buffer.writeString(body)
                        stream.write(HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(buffer), endStream: true)), promise: nil)
                    }
                    stream.flush()
                }
            }
        }
        // Stretched under sanitizers (TestTiming); a test that expects no answer waits that much longer.
        let timeout = TimeAmount.nanoseconds(Int64(Double(timeout.nanoseconds) * TestTiming.scale))
        let timeoutTask = loop.scheduleTask(in: timeout) {
            promise.fail(H2TestClientError(description: "no response within \(timeout)"))
        }
        defer { timeoutTask.cancel() }
        return try await promise.futureResult.get()
    }

    /// Closes the connection.
    func close() async {
        try? await channel.close()
    }
}

/// Records GOAWAY and SETTINGS frames of the connection.
final class RootFrameRecorder: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTP2Frame

    private let state = Locked<(goAways: [ReceivedGoAway], maxStreams: Int?)>(([], nil))

    var goAways: [ReceivedGoAway] { state.withLock { $0.goAways } }
    var maxConcurrentStreams: Int? { state.withLock { $0.maxStreams } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .goAway(let lastStreamID, let errorCode, let opaqueData):
            let debug = opaqueData.map { String(buffer: $0) } ?? ""
            state.withLock {
                $0.goAways.append(ReceivedGoAway(lastStreamID: Int(lastStreamID), errorCode: errorCode, debugData: debug))
            }
        case .settings(.settings(let settings)):
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                state.withLock { $0.maxStreams = setting.value }
            }
        default:
            break
        }
        context.fireChannelRead(data)
    }
}

/// Collects one response on a client stream.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload

    private let promise: EventLoopPromise<H2Response>
    private var status: Int?
    private var headers: [String: String] = [:]
    private var body = ""

    init(promise: EventLoopPromise<H2Response>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            for (name, value, _) in frame.headers {
                if name == ":status" { status = Int(value) } else { headers[name] = value }
            }
            if frame.endStream { complete() }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data { body += String(buffer: buffer) }
            if frame.endStream { complete() }
        case .rstStream(let code):
            promise.fail(H2TestClientError(description: "stream reset: \(code)"))
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(H2TestClientError(description: "stream closed without a complete response"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
    }

    private func complete() {
        guard let status else {
            promise.fail(H2TestClientError(description: "response without :status"))
            return
        }
        promise.succeed(H2Response(status: status, headers: headers, body: body))
    }
}
