import NIOCore
import NIOHTTP2
import NIOSSL
import NIOTLS

/// Receives connection events from the handler (on the connection's event loop).
protocol APNSConnectionDelegate: AnyObject, Sendable {
    func connectionMaxStreamsChanged(id: Int, maxStreams: Int)
    func connectionGoAway(id: Int, lastStreamID: HTTP2StreamID, errorCode: HTTP2ErrorCode, reason: String?)
    func connectionClosed(id: Int, error: APNSError?)
}

/// What the streams of one connection need to know about a GOAWAY. Confined to the connection's event loop.
final class APNSGoAwayState {
    /// The lowest last-stream-id of the GOAWAYs received: streams above it were not processed.
    var lastStreamID: HTTP2StreamID?
}

/// Connection-level HTTP/2 handling (stream 0): learns the server's SETTINGS_MAX_CONCURRENT_STREAMS,
/// signals readiness after the first SETTINGS, checks ALPN, watches GOAWAY and keeps the connection
/// healthy with PINGs when idle (no PONG in time → close, the pool replaces it).
final class APNSConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    struct Ready: Sendable {
        let maxStreams: Int
        let multiplexer: NIOHTTP2Handler.StreamMultiplexer
        let goAway: NIOLoopBound<APNSGoAwayState>
    }

    private let id: Int
    private let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    private let goAway: APNSGoAwayState
    private let maxStreamsCap: Int
    private let pingInterval: TimeAmount
    private let pingTimeout: TimeAmount
    private weak var delegate: (any APNSConnectionDelegate)?
    private var ready: EventLoopPromise<Ready>?
    private var firstError: APNSError?
    private var maxStreams: Int?
    private var lastActivity = NIODeadline.now()
    private var pingTask: Scheduled<Void>?
    private var pongTimeoutTask: Scheduled<Void>?
    private var closed = false

    init(
        id: Int, multiplexer: NIOHTTP2Handler.StreamMultiplexer, goAway: APNSGoAwayState, maxStreamsCap: Int,
        pingInterval: TimeAmount, pingTimeout: TimeAmount, delegate: any APNSConnectionDelegate, ready: EventLoopPromise<Ready>
    ) {
        self.id = id
        self.multiplexer = multiplexer
        self.goAway = goAway
        self.maxStreamsCap = maxStreamsCap
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
        self.delegate = delegate
        self.ready = ready
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // If readiness fails from outside (connect timeout), close the channel.
        ready?.futureResult.assumeIsolated().whenFailure { _ in context.close(promise: nil) }
        schedulePingCheck(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimers()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        lastActivity = .now()
        switch frame.payload {
        case .settings(.settings(let settings)):
            var newMax: Int?
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                newMax = min(setting.value, maxStreamsCap)
            }
            if let ready {
                self.ready = nil
                let value = newMax ?? maxStreamsCap  // absent = unlimited
                maxStreams = value
                ready.succeed(Ready(maxStreams: value, multiplexer: multiplexer, goAway: NIOLoopBound(goAway, eventLoop: context.eventLoop)))
            } else if let newMax, newMax != maxStreams {
                maxStreams = newMax
                delegate?.connectionMaxStreamsChanged(id: id, maxStreams: newMax)
            }
        case .ping(_, ack: true):
            pongTimeoutTask?.cancel()
            pongTimeoutTask = nil
        case .goAway(let lastStreamID, let errorCode, let opaqueData):
            // Recorded before NIO closes the streams above lastStreamID (it delivers those events after this
            // frame), so their handlers can tell "refused, safe to retry" from "lost".
            goAway.lastStreamID = min(goAway.lastStreamID ?? lastStreamID, lastStreamID)
            let reason = opaqueData.flatMap { Self.reason(fromDebugData: $0) }
            delegate?.connectionGoAway(id: id, lastStreamID: lastStreamID, errorCode: errorCode, reason: reason)
        default:
            break
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiatedProtocol) = event, negotiatedProtocol != "h2" {
            record(APNSError(.tlsFailure, "server did not negotiate HTTP/2 via ALPN (got \(negotiatedProtocol ?? "none"))"))
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        record(Self.classify(error))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimers()
        if let ready {
            self.ready = nil
            ready.fail(firstError ?? APNSError(.connectFailed, "connection closed before HTTP/2 settings were received"))
        } else if !closed {
            closed = true
            delegate?.connectionClosed(id: id, error: firstError)
        }
        context.fireChannelInactive()
    }

    private func record(_ error: APNSError) {
        if firstError == nil { firstError = error }
    }

    private func cancelTimers() {
        pingTask?.cancel()
        pingTask = nil
        pongTimeoutTask?.cancel()
        pongTimeoutTask = nil
    }

    private func schedulePingCheck(context: ChannelHandlerContext) {
        let loop = context.eventLoop.assumeIsolated()
        pingTask = loop.scheduleTask(in: pingInterval) {
            self.pingCheck(context: context)
        }
    }

    private func pingCheck(context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        if pongTimeoutTask == nil, NIODeadline.now() - lastActivity >= pingInterval {
            let payload = HTTP2PingData(withInteger: UInt64(truncatingIfNeeded: NIODeadline.now().uptimeNanoseconds))
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(payload, ack: false))), promise: nil)
            pongTimeoutTask = context.eventLoop.assumeIsolated().scheduleTask(in: pingTimeout) {
                self.record(APNSError(.connectionLost, "no PING acknowledgement within the ping timeout"))
                context.close(promise: nil)
            }
        }
        schedulePingCheck(context: context)
    }

    /// Reads `{"reason":"..."}` from GOAWAY debug data (best effort, never fails).
    static func reason(fromDebugData data: ByteBuffer) -> String? {
        guard let text = data.getString(at: data.readerIndex, length: min(data.readableBytes, 512)) else { return nil }
        guard let keyRange = text.range(of: "\"reason\"") else { return text.isEmpty ? nil : text }
        let rest = text[keyRange.upperBound...].drop { $0 == " " || $0 == ":" }
        guard rest.first == "\"" else { return nil }
        let value = rest.dropFirst().prefix { $0 != "\"" }
        return String(value)
    }

    /// Maps channel errors to stable codes.
    static func classify(_ error: any Error) -> APNSError {
        if let error = error as? APNSError { return error }
        if error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            return APNSError(.tlsFailure, "TLS failed: \(error)")
        }
        if error is ChannelError, case .connectTimeout = error as? ChannelError {
            return APNSError(.connectFailed, "TCP connect timed out")
        }
        return APNSError(.connectFailed, "connection failed: \(error)")
    }
}
