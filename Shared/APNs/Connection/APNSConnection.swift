import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// One HTTP/2 + TLS connection to APNs. Streams are opened by the pool, which does the stream accounting.
final class APNSConnection: Sendable {
    let id: Int
    let channel: any Channel
    private let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    private let goAway: NIOLoopBound<APNSGoAwayState>

    init(id: Int, channel: any Channel, multiplexer: NIOHTTP2Handler.StreamMultiplexer, goAway: NIOLoopBound<APNSGoAwayState>) {
        self.id = id
        self.channel = channel
        self.multiplexer = multiplexer
        self.goAway = goAway
    }

    /// Sends one request on a new stream. The future always succeeds, with a response or a failure.
    func execute(headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline) -> EventLoopFuture<APNSStreamResult> {
        let promise = channel.eventLoop.makePromise(of: APNSStreamResult.self)
        let created = channel.eventLoop.makePromise(of: (any Channel).self)
        created.futureResult.whenFailure { _ in promise.succeed(.failed(.notSent)) }
        let goAway = self.goAway
        multiplexer.createStreamChannel(promise: created) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(
                    APNSStreamHandler(headers: headers, body: body, deadline: deadline, goAway: goAway.value, promise: promise))
            }
        }
        return promise.futureResult
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
        let timeout = eventLoop.scheduleTask(in: .nanoseconds(configuration.connectTimeout.nanoseconds)) {
            ready.fail(APNSError(.connectFailed, "connecting to \(endpoint) took longer than the connect timeout"))
        }
        let sniHost: String? = isIPAddress(endpoint.host) ? nil : endpoint.host
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(.nanoseconds(configuration.connectTimeout.nanoseconds))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: tlsContext, serverHostname: sniHost))
                    try sync.addHandler(APNSFlushCoalescingHandler())
                    let (connectionConfiguration, streamConfiguration) = http2Configuration(configuration)
                    let mux = try sync.configureHTTP2Pipeline(
                        mode: .client,
                        connectionConfiguration: connectionConfiguration,
                        streamConfiguration: streamConfiguration,
                        inboundStreamInitializer: { stream in stream.close() }  // APNs never pushes streams
                    )
                    try sync.addHandler(
                        APNSConnectionHandler(
                            id: id, multiplexer: mux, goAway: APNSGoAwayState(), maxStreamsCap: configuration.maxStreamsPerConnection,
                            pingInterval: .nanoseconds(configuration.pingInterval.nanoseconds),
                            pingTimeout: .nanoseconds(configuration.pingTimeout.nanoseconds),
                            delegate: delegate, ready: ready))
                }
            }
        let connected = bootstrap.connect(host: endpoint.host, port: endpoint.port)
        connected.whenFailure { error in ready.fail(APNSConnectionHandler.classify(error)) }
        ready.futureResult.and(connected).whenComplete { outcome in
            timeout.cancel()
            switch outcome {
            case .success(let (readiness, channel)):
                result.succeed((APNSConnection(id: id, channel: channel, multiplexer: readiness.multiplexer, goAway: readiness.goAway), readiness.maxStreams))
            case .failure(let error):
                connected.whenSuccess { $0.close(promise: nil) }
                result.fail(APNSConnectionHandler.classify(error))
            }
        }
        return result.futureResult
    }

    /// HTTP/2 settings for a connection to APNs.
    ///
    /// NIO's defaults are tuned for servers facing untrusted clients and break a busy APNs client:
    /// - only the last 32 reset streams are remembered, so a late answer to a stream we cancelled on timeout
    ///   (any of the hundreds in flight) is a connection error (STREAM_CLOSED) that takes every other stream
    ///   on the connection down with `connection-lost`;
    /// - more than 200 RST_STREAM frames in 30 s (e.g. REFUSED_STREAM for the streams above a GOAWAY's last
    ///   stream id) or 200 stream errors per connection make NIO close it with ENHANCE_YOUR_CALM.
    /// The server is APNs (trusted, verified by TLS), so these limits are sized to the stream count instead.
    static func http2Configuration(
        _ configuration: APNSClientConfiguration
    ) -> (NIOHTTP2Handler.ConnectionConfiguration, NIOHTTP2Handler.StreamConfiguration) {
        let streams = max(configuration.maxStreamsPerConnection, 100)
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
            HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoder.defaultMaxHeaderListSize),
        ]
        connection.maximumRecentlyResetStreams = streams * 2
        connection.maximumConnectionGlitches = Int.max / 2
        var stream = NIOHTTP2Handler.StreamConfiguration()
        stream.streamResetFrameRateLimit.maximumCount = streams * 100
        stream.streamErrorRateLimit.maximumCount = streams * 100
        return (connection, stream)
    }

    private static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}
