import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// One HTTP/2 + TLS connection to APNs. Streams are opened by the pool, which does the stream accounting.
final class APNSConnection: Sendable {
    let id: Int
    let channel: any Channel
    private let handler: NIOLoopBound<APNSConnectionHandler>

    init(id: Int, channel: any Channel, handler: NIOLoopBound<APNSConnectionHandler>) {
        self.id = id
        self.channel = channel
        self.handler = handler
    }

    /// Sends one request on a new stream: a response or why there is none (never throws, never hangs: the
    /// deadline, the stream's end and the connection's end all answer).
    func execute(headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline) async -> APNSStreamResult {
        await withUnsafeContinuation { submit(headers: headers, body: body, deadline: deadline, completion: .task($0)) }
    }

    /// ``execute(headers:body:deadline:)`` without a task: `then` gets the result, exactly once, on the
    /// connection's event loop.
    func submit(headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline, then: @escaping @Sendable (APNSStreamResult) -> Void) {
        submit(headers: headers, body: body, deadline: deadline, completion: .callback(then))
    }

    private func submit(headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline, completion: APNSConnectionHandler.Completion) {
        let loop = channel.eventLoop
        let handler = self.handler
        if loop.inEventLoop {
            handler.value.submit(headers: headers, body: body, deadline: deadline, completion: completion)
        } else {
            loop.execute { handler.value.submit(headers: headers, body: body, deadline: deadline, completion: completion) }
        }
    }

    /// Sends GOAWAY, lets the streams in flight finish, then closes (the server said `IdleTimeout`).
    func retire() {
        let handler = self.handler
        channel.eventLoop.execute { handler.value.retireOnRequest() }
    }

    /// Closes the connection (in-flight streams end with `connectionLost`).
    func close() -> EventLoopFuture<Void> {
        let promise = channel.eventLoop.makePromise(of: Void.self)
        channel.close(promise: promise)
        return promise.futureResult.recover { _ in }
    }

    /// Opens a connection: TCP (fresh DNS lookup), TLS with ALPN h2, HTTP/2 preface, first SETTINGS.
    ///
    /// The future completes when the server's first SETTINGS arrived, or fails with an ``APNSError``
    /// (`tls-failure`, `connect-failed`) — bounded by `connectTimeout`.
    static func connect(
        id: Int, endpoint: APNSEndpoint, tlsContext: NIOSSLContext, eventLoop: any EventLoop,
        configuration: APNSClientConfiguration, delegate: any APNSConnectionDelegate
    ) -> EventLoopFuture<(APNSConnection, Int)> {
        let ready = eventLoop.makePromise(of: APNSConnectionHandler.Ready.self)
        let result = eventLoop.makePromise(of: (APNSConnection, Int).self)
        let timeout = eventLoop.scheduleTask(in: TimeAmount(configuration.connectTimeout)) {
            ready.fail(APNSError(.connectFailed, "connecting to \(endpoint) took longer than the connect timeout"))
        }
        let sniHost: String? = isIPAddress(endpoint.host) ? nil : endpoint.host
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    let handler = APNSConnectionHandler(
                        id: id, maxStreamsCap: configuration.maxStreamsPerConnection, firstStreamID: configuration.firstStreamID,
                        pingInterval: TimeAmount(configuration.pingInterval),
                        pingTimeout: TimeAmount(configuration.pingTimeout),
                        inFlightReadTimeout: TimeAmount(configuration.inFlightReadTimeout),
                        delegate: delegate, ready: ready)
                    let http2 = http2Configuration(configuration)
                    try sync.addHandler(NIOSSLClientHandler(context: tlsContext, serverHostname: sniHost))
                    try sync.addHandler(APNSFlushCoalescingHandler())
                    // Frame mode: no stream multiplexer, so no child channel per request; the handler keeps the
                    // streams itself and sees every frame NIO writes (its own resets and GOAWAYs included).
                    try sync.addHandler(
                        NIOHTTP2Handler(
                            mode: .client, frameDelegate: handler, connectionConfiguration: http2.connection,
                            streamConfiguration: http2.stream))
                    try sync.addHandler(handler)
                }
            }
        let connected = bootstrap.connect(host: endpoint.host, port: endpoint.port)
        connected.whenFailure { error in ready.fail(APNSConnectionHandler.classify(error)) }
        ready.futureResult.and(connected).whenComplete { outcome in
            timeout.cancel()
            switch outcome {
            case .success(let (readiness, channel)):
                result.succeed((APNSConnection(id: id, channel: channel, handler: readiness.handler), readiness.maxStreams))
            case .failure(let error):
                connected.whenSuccess { $0.close(promise: nil) }
                result.fail(APNSConnectionHandler.classify(error))
            }
        }
        return result.futureResult
    }

    /// NIO's HTTP/2 settings for a client of one trusted server.
    ///
    /// NIO's defaults protect a server from untrusted clients. Applied to a client they make it close its own
    /// connection to APNs (ENHANCE_YOUR_CALM) on ordinary server behaviour, losing every push in flight on it:
    /// - more than 200 SETTINGS or PINGs in 30 s (a server that changes its stream limit often, e.g. after every
    ///   rejected push) or 200 RST_STREAMs in 30 s (a server refusing bursts of streams);
    /// - 200 stream errors in 30 s, or 200 over the connection's whole life ("glitches": a few malformed answers
    ///   a day on a connection that lives for weeks);
    /// - a second empty DATA frame in a row;
    /// - only the last 32 streams we reset are remembered: a late answer to any other stream we cancelled on its
    ///   deadline is a connection error (STREAM_CLOSED).
    /// The server is APNs, authenticated by TLS, so the rate limits are set where only a peer sending nothing
    /// else could reach them, and the reset memory covers several deadlines' worth of streams.
    ///
    /// NIO's header block validation is off (it cannot be turned off one way only). It cost ~5 % of the worker's
    /// CPU in a drain profile, checking blocks that need no check here:
    /// - what the client sends is built from checked values only: fixed names, a hex device token
    ///   (`APNSVoIPPush.validate()` before every send), a UUID, a bundle id of letters, digits, `.` and `-`
    ///   and an endpoint host of host-name characters (both checked when the client is made), and the
    ///   provider token's base64url;
    /// - of what the server sends, the handler reads three fields and takes each only when well formed
    ///   (`APNSConnectionHandler.responseFields`); nothing else in a response block is read or passed on.
    ///
    /// Content-length validation is off too (NIO searched every block for the field, 0.6 % of a drain's CPU): requests
    /// carry none, and an answer's body is read to the end of its stream, capped at
    /// `APNSConnectionHandler.maximumBodySize`, and parsed only as an error reason.
    static func http2Configuration(
        _ configuration: APNSClientConfiguration
    ) -> (connection: NIOHTTP2Handler.ConnectionConfiguration, stream: NIOHTTP2Handler.StreamConfiguration) {
        let streams = max(configuration.maxStreamsPerConnection, APNSConnectionHandler.defaultMaxStreams)
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
            HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoder.defaultMaxHeaderListSize),
        ]
        connection.headerBlockValidation = .disabled
        connection.contentLengthValidation = .disabled
        connection.maximumRecentlyResetStreams = streams * 4
        connection.maximumConnectionGlitches = 1 << 40
        connection.maximumSequentialEmptyDataFrames = 100
        connection.controlFrameRateLimit.maximumCount = floodLimit.count
        connection.controlFrameRateLimit.windowLength = floodLimit.window
        var stream = NIOHTTP2Handler.StreamConfiguration()
        stream.streamResetFrameRateLimit.maximumCount = floodLimit.count
        stream.streamResetFrameRateLimit.windowLength = floodLimit.window
        stream.streamErrorRateLimit.maximumCount = floodLimit.count
        stream.streamErrorRateLimit.windowLength = floodLimit.window
        return (connection, stream)
    }

    /// Over 10,000 frames of one kind within 100 ms (100,000 a second). NIO keeps one timestamp per frame in the
    /// window, so a short window keeps that memory small.
    static let floodLimit = (count: 10_000, window: TimeAmount.milliseconds(100))

    private static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}
