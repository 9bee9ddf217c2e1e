import NIOCore
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
    func execute(headers: [(name: String, value: String)], body: ByteBuffer, deadline: NIODeadline) async -> APNSStreamResult {
        let loop = channel.eventLoop
        let handler = self.handler
        return await withUnsafeContinuation { completion in
            if loop.inEventLoop {
                handler.value.submit(headers: headers, body: body, deadline: deadline, completion: completion)
            } else {
                loop.execute { handler.value.submit(headers: headers, body: body, deadline: deadline, completion: completion) }
            }
        }
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
                    try sync.addHandler(
                        APNSConnectionHandler(
                            id: id, maxStreamsCap: configuration.maxStreamsPerConnection, firstStreamID: configuration.firstStreamID,
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
                result.succeed((APNSConnection(id: id, channel: channel, handler: readiness.handler), readiness.maxStreams))
            case .failure(let error):
                connected.whenSuccess { $0.close(promise: nil) }
                result.fail(APNSConnectionHandler.classify(error))
            }
        }
        return result.futureResult
    }

    private static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}
