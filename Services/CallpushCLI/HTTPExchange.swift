import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Locking

/// The answer to one HTTP request.
struct HTTPAnswer: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]

    var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// One HTTP/1.1 request per connection (`Connection: close`), http or https, every wait
/// bounded by `timeout`. Small on purpose: `callpush send` makes a handful of requests.
struct HTTPExchange: Sendable {
    var baseURL: URL
    var timeout: Duration
    /// Extra CA (PEM file) to trust for https, e.g. a private CA in front of dispatch.
    var caFile: String?

    /// Checks the URL: http or https with a host.
    static func validate(_ text: String) -> URL? {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = url.host, !host.isEmpty else { return nil }
        return url
    }

    /// Sends the request; `onBody` sees each body chunk as it arrives and may return `false`
    /// to stop reading (a stream such as server-sent events).
    func send(_ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
              timeout requestTimeout: Duration? = nil,
              onBody: (@Sendable ([UInt8]) -> Bool)? = nil) async throws -> HTTPAnswer {
        guard let host = baseURL.host else { throw CLIError.usage("--url has no host") }
        let https = baseURL.scheme?.lowercased() == "https"
        let port = baseURL.port ?? (https ? 443 : 80)
        let prefix = baseURL.path.hasSuffix("/") ? String(baseURL.path.dropLast()) : baseURL.path
        let bound = requestTimeout ?? timeout
        let tls = try https ? makeTLSContext() : nil
        let channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.milliseconds(Int64(timeout.inSeconds * 1000)))
                .connect(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let tls {
                            let serverName = host.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" } ? nil : host
                            try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverName))
                        }
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            let text = "\(error)"
            let reason = text.contains("Connection refused") ? "connection refused" : String(text.prefix(160))
            throw CLIError("http-unreachable", "cannot connect to \(host):\(port) (\(reason))", exitCode: CLIExit.unavailable)
        }
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: prefix + path)
        head.headers.add(name: "Host", value: baseURL.port.map { "\(host):\($0)" } ?? host)
        head.headers.add(name: "Connection", value: "close")
        head.headers.add(name: "User-Agent", value: "callpush-cli")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        if let body { head.headers.add(name: "Content-Length", value: String(body.count)) }
        let request = head
        return try await withThrowingTaskGroup(of: HTTPAnswer?.self) { group in
            group.addTask { try await Self.exchange(channel, request, body: body, onBody: onBody) }
            group.addTask {
                try await Task.sleep(for: bound)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let answer = first else {
                channel.channel.close(promise: nil)
                throw CLIError("http-timeout", "\(method) \(prefix + path): no complete answer within \(DurationArgument.format(bound))",
                               exitCode: CLIExit.unavailable)
            }
            return answer
        }
    }

    private static func exchange(_ channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>, _ head: HTTPRequestHead,
                                 body: [UInt8]?, onBody: (@Sendable ([UInt8]) -> Bool)?) async throws -> HTTPAnswer {
        try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(.head(head))
            if let body { try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
            try await outbound.write(.end(nil))
            var answer = HTTPAnswer(status: 0, headers: [:], body: [])
            for try await part in inbound {
                switch part {
                case .head(let response):
                    answer.status = Int(response.status.code)
                    answer.headers = response.headers
                case .body(let buffer):
                    let bytes = Array(buffer.readableBytesView)
                    if let onBody, answer.status < 300 {
                        if !onBody(bytes) { return answer }
                    } else if answer.body.count < 1 << 20 {
                        answer.body += bytes
                    }
                case .end:
                    return answer
                }
            }
            throw CLIError("http-closed", "the connection closed before the answer was complete")
        }
    }

    private func makeTLSContext() throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            do {
                let certificates = try NIOSSLCertificate.fromPEMFile(caFile)
                configuration.trustRoots = .default
                configuration.additionalTrustRoots = [.certificates(certificates)]
            } catch {
                throw CLIError.usage("--ca-file \(caFile): not a readable PEM certificate file")
            }
        }
        return try NIOSSLContext(configuration: configuration)
    }
}
