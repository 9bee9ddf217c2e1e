import HTTP2Wire
import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import NIOTLS

/// The FCM listener's connections: TLS, then by ALPN either HTTP/2 (``FCMHTTP2Handler``) or HTTP/1.1
/// (Hummingbird's `HTTP1Channel` and the application's responder). Plugged into Hummingbird as its server,
/// which keeps the listener, the connection limit and graceful shutdown.
struct FCMServerChannel: ServerChildChannel {
    enum Negotiated: Sendable {
        case http1(HTTP1Channel.Value)
        case http2(any Channel)
    }

    struct Value: ServerChildChannelValue {
        let negotiated: EventLoopFuture<Negotiated>
        let channel: any Channel
    }

    let sslContext: NIOSSLContext
    let http1: HTTP1Channel
    let core: FCMSimulatorCore

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(NIOSSLServerHandler(context: sslContext))
            let alpn = NIOTypedApplicationProtocolNegotiationHandler<Negotiated> { result, channel in
                switch result {
                case .negotiated("h2"):
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(FCMHTTP2Handler(core: core))
                        return .http2(channel)
                    }
                case .negotiated("http/1.1"), .fallback:
                    return http1.setup(channel: channel, logger: logger).map { .http1($0) }
                case .negotiated:
                    return channel.close().flatMapThrowing { throw FCMSimulatorError(code: .startFailed, message: "unexpected ALPN protocol") }
                }
            }
            try sync.addHandler(alpn)
            return Value(negotiated: alpn.protocolNegotiationResult, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        guard let negotiated = try? await value.negotiated.get() else { return }
        switch negotiated {
        case .http1(let connection):
            await http1.handle(value: connection, logger: logger)
        case .http2(let channel):
            // Graceful shutdown reaches the handler as ChannelShouldQuiesceEvent (GOAWAY, then close).
            try? await channel.closeFuture.get()
        }
    }
}
