import NIOCore
import NIOHPACK
import NIOHTTP2

/// What happened to one HTTP/2 request on one stream.
enum APNSStreamResult: Sendable {
    case response(status: Int, apnsID: String?, uniqueID: String?, body: ByteBuffer?)
    case failed(APNSStreamFailure)
}

/// Why a stream ended without a response.
enum APNSStreamFailure: Sendable, Equatable {
    /// The request never reached the server (stream not created, headers not written). Safe to retry.
    case notSent
    /// REFUSED_STREAM, or closed by a GOAWAY whose last-stream-id is below ours: not processed. Safe to retry.
    case refused
    /// The deadline passed first; the stream was reset with CANCEL.
    case timeout
    /// The connection closed after the request was written: it may have been delivered.
    case connectionLost
    /// The server reset the stream with another error code.
    case reset(HTTP2ErrorCode)
    /// The server's answer was not a valid response.
    case protocolError
}

/// Writes one APNs request on a fresh stream and completes its promise exactly once: with the response,
/// or with why there is none (never left pending: deadline timer, stream close and channel close all finish it).
final class APNSStreamHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// Error bodies are tiny JSON; anything larger is cut (the reason is in the first bytes).
    private static let maximumBodySize = 16 * 1024

    private let headers: HPACKHeaders
    private let body: ByteBuffer
    private let deadline: NIODeadline
    private let goAway: APNSGoAwayState
    private var streamID: HTTP2StreamID?
    private var promise: EventLoopPromise<APNSStreamResult>?
    private var timeoutTask: Scheduled<Void>?
    private var started = false
    private var headersWritten = false
    private var status: Int?
    private var apnsID: String?
    private var uniqueID: String?
    private var responseBody: ByteBuffer?

    init(
        headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline, goAway: APNSGoAwayState,
        promise: EventLoopPromise<APNSStreamResult>
    ) {
        self.headers = headers
        self.body = body
        self.deadline = deadline
        self.goAway = goAway
        self.promise = promise
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard !started, promise != nil else { return }
        started = true
        let loop = context.eventLoop.assumeIsolated()
        timeoutTask = loop.scheduleTask(deadline: deadline) {
            self.finish(.failed(.timeout))
            context.close(promise: nil)  // RST_STREAM(CANCEL)
        }
        let headersPromise = context.eventLoop.makePromise(of: Void.self)
        headersPromise.futureResult.assumeIsolated().whenComplete { result in
            if case .success = result { self.headersWritten = true }
        }
        context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: headersPromise)
        context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(body), endStream: true))), promise: nil)
        // The id is assigned when the headers leave the stream channel (on flush).
        streamID = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if status == nil {
                headersWritten = true
                guard let statusText = frame.headers.first(name: ":status"), let code = Int(statusText) else {
                    finish(.failed(.protocolError))
                    context.close(promise: nil)
                    return
                }
                status = code
                apnsID = frame.headers.first(name: "apns-id")
                uniqueID = frame.headers.first(name: "apns-unique-id")
            }
            if frame.endStream { finishWithResponse() }
        case .data(let frame):
            if case .byteBuffer(var chunk) = frame.data {
                if responseBody == nil {
                    responseBody = chunk
                } else if responseBody!.readableBytes + chunk.readableBytes <= Self.maximumBodySize {
                    responseBody!.writeBuffer(&chunk)
                }
            }
            if frame.endStream { finishWithResponse() }
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent {
            switch closed.reason {
            case .refusedStream?: finish(.failed(.refused))
            // NIOHTTP2 closes open streams with CANCEL when the connection goes away.
            case .cancel?: finish(.failed(cancelled))
            case let code?: finish(.failed(.reset(code)))
            case nil: finishWithResponse()
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let closed = error as? NIOHTTP2Errors.StreamClosed {
            switch closed.errorCode {
            case .refusedStream: finish(.failed(.refused))
            case .cancel: finish(.failed(cancelled))
            default: finish(.failed(.reset(closed.errorCode)))
            }
        } else if error is NIOHTTP2Errors.CreatedStreamAfterGoaway {
            finish(.failed(.refused))
        } else {
            finish(.failed(cancelled))
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failed(cancelled))
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        finish(.failed(cancelled))
    }

    /// Why a stream closed with CANCEL ended: NIO uses CANCEL for every stream still open when the connection
    /// goes away, and for those above a GOAWAY's last-stream-id (never processed: refused, safe to retry).
    private var cancelled: APNSStreamFailure {
        if streamID == nil, !headersWritten { return .notSent }
        if let streamID, let last = goAway.lastStreamID, streamID > last { return .refused }
        return headersWritten ? .connectionLost : .notSent
    }

    private func finishWithResponse() {
        if let status {
            finish(.response(status: status, apnsID: apnsID, uniqueID: uniqueID, body: responseBody))
        } else {
            finish(.failed(.protocolError))
        }
    }

    private func finish(_ result: APNSStreamResult) {
        guard let promise else { return }
        self.promise = nil
        timeoutTask?.cancel()
        timeoutTask = nil
        promise.succeed(result)
    }
}
