import HTTP2Wire
import NIOCore
import NIOHPACK
import NIOSSL
import NIOTLS

/// Receives connection events from the handler (on the connection's event loop).
protocol APNSConnectionDelegate: AnyObject, Sendable {
    func connectionMaxStreamsChanged(id: Int, maxStreams: Int)
    func connectionGoAway(id: Int, lastStreamID: UInt32, errorCode: HTTP2Wire.ErrorCode, reason: String?)
    func connectionClosed(id: Int, error: APNSError?)
}

/// What happened to one HTTP/2 request on one stream.
enum APNSStreamResult: Sendable {
    case response(status: Int, apnsID: String?, uniqueID: String?, body: ByteBuffer?)
    case failed(APNSStreamFailure)
}

/// Why a stream ended without a response.
enum APNSStreamFailure: Sendable, Equatable {
    /// The request never reached the server (no stream opened before the deadline or the connection's end).
    /// Safe to retry.
    case notSent
    /// REFUSED_STREAM, or above a GOAWAY's last-stream-id: not processed. Safe to retry.
    case refused
    /// The deadline passed first; the stream was reset with CANCEL.
    case timeout
    /// The connection closed after the request was written: it may have been delivered.
    case connectionLost
    /// The server reset the stream with another error code.
    case reset(HTTP2Wire.ErrorCode)
    /// The server's answer was not a valid response.
    case protocolError
}

/// One connection to APNs, on its event loop: HTTP/2 (``HTTP2Connection`` in the client role, right after TLS),
/// one stream per request with its deadline, requests waiting for a stream slot when the server's
/// MAX_CONCURRENT_STREAMS is reached, the server's SETTINGS and GOAWAY reported to the pool, PINGs when idle
/// (no answer in time → close, the pool replaces the connection).
///
/// Every request's completion is resumed exactly once: with the response, or with why there is none (deadline,
/// reset, GOAWAY, connection end). Writes made while handling input are flushed once at the end of the read;
/// requests submitted from outside share one flush per event-loop tick.
final class APNSConnectionHandler: ChannelInboundHandler, HTTP2ConnectionDelegate {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Ready: Sendable {
        let maxStreams: Int
        let handler: NIOLoopBound<APNSConnectionHandler>
    }

    /// Error bodies are tiny JSON; anything larger is cut (the reason is in the first bytes).
    static let maximumBodySize = 16 * 1024
    /// Our receive windows: answers are small, but many arrive at once.
    static let connectionWindow = 1 << 20

    typealias Completion = UnsafeContinuation<APNSStreamResult, Never>

    /// A request on an open stream.
    private struct Exchange {
        var completion: Completion
        var deadline: NIODeadline
        var status: Int?
        var apnsID: String?
        var uniqueID: String?
        var body: ByteBuffer?
    }

    /// A request waiting for a stream slot.
    private struct Waiting {
        var headers: [(name: String, value: String)]
        var body: ByteBuffer
        var deadline: NIODeadline
        var completion: Completion
    }

    private let id: Int
    private let maxStreamsCap: Int
    private let pingInterval: TimeAmount
    private let pingTimeout: TimeAmount
    private weak var delegate: (any APNSConnectionDelegate)?
    private let http2: HTTP2Connection
    private var context: ChannelHandlerContext?
    private var ready: EventLoopPromise<Ready>?
    private var exchanges: [UInt32: Exchange] = [:]
    private var waiting: [Int: Waiting] = [:]
    private var waitingOrder = CircularBuffer<Int>()
    private var nextWaitingID = 0
    private var firstError: APNSError?
    private var maxStreams: Int?
    private var lastActivity = NIODeadline.now()
    private var pingTask: Scheduled<Void>?
    private var pongTimeoutTask: Scheduled<Void>?
    /// One timer for all deadlines (requests and waiting requests), armed for the earliest known one.
    private var deadlineTimer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    private var inReadLoop = false
    private var flushScheduled = false
    private var closing = false
    private var closed = false

    init(
        id: Int, maxStreamsCap: Int, firstStreamID: UInt32 = 1, pingInterval: TimeAmount, pingTimeout: TimeAmount,
        delegate: any APNSConnectionDelegate, ready: EventLoopPromise<Ready>
    ) {
        self.id = id
        self.maxStreamsCap = maxStreamsCap
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
        self.delegate = delegate
        self.ready = ready
        self.http2 = HTTP2Connection(
            role: .client, allocator: ByteBufferAllocator(), settings: [(.enablePush, 0), (.maxConcurrentStreams, 100)],
            streamWindow: HTTP2Wire.defaultWindow, connectionWindow: Self.connectionWindow,
            maxHeaderListSize: HPACKDecoder.defaultMaxHeaderListSize, firstStreamID: firstStreamID
        )
        self.http2.delegate = self
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // If readiness fails from outside (connect timeout), close the channel.
        ready?.futureResult.assumeIsolated().whenFailure { _ in context.close(promise: nil) }
        schedulePingCheck(context: context)
        if context.channel.isActive { flush() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimers()
        // Normally empty by now (channelInactive ended everything); never leave a request waiting.
        closing = true
        for stream in exchanges.keys.sorted() { finish(stream, .failed(.connectionLost)) }
        failWaiting(.notSent)
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        flush()  // the preface; TLS sends it once the handshake is done
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastActivity = .now()
        inReadLoop = true
        http2.receive(unwrapInboundIn(data))
        if http2.wantsClose { flush() }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        inReadLoop = false
        flush()
        context.fireChannelReadComplete()
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
        closing = true
        cancelTimers()
        if let error = http2.lastError {
            record(APNSError(.connectionLost, "HTTP/2 protocol error from the server: \(error.code) \(error.detail)"))
        }
        http2.connectionClosed()  // open streams end: connection lost
        failWaiting(.notSent)
        if let ready {
            self.ready = nil
            ready.fail(firstError ?? APNSError(.connectFailed, "connection closed before HTTP/2 settings were received"))
        } else if !closed {
            closed = true
            delegate?.connectionClosed(id: id, error: firstError)
        }
        context.fireChannelInactive()
    }

    // MARK: Requests

    /// Sends one request (on the event loop). `completion` is resumed exactly once, with a response or a failure.
    func submit(headers: [(name: String, value: String)], body: ByteBuffer, deadline: NIODeadline, completion: Completion) {
        guard !closing, context != nil else { return completion.resume(returning: .failed(.notSent)) }
        if http2.goAwayReceived != nil || http2.goAwaySent != nil { return completion.resume(returning: .failed(.refused)) }
        if waitingOrder.isEmpty, http2.canOpenStream {
            open(headers: headers, body: body, deadline: deadline, completion: completion)
            scheduleFlush()
            return
        }
        // The server's stream limit is reached (it lowered it below what the pool leased): wait for a slot.
        let key = nextWaitingID
        nextWaitingID += 1
        waiting[key] = Waiting(headers: headers, body: body, deadline: deadline, completion: completion)
        waitingOrder.append(key)
        armTimer(for: deadline)
    }

    private func open(headers: [(name: String, value: String)], body: ByteBuffer, deadline: NIODeadline, completion: Completion) {
        guard let stream = http2.openStream(headers: headers, body: body) else {
            return completion.resume(returning: .failed(.notSent))
        }
        exchanges[stream] = Exchange(completion: completion, deadline: deadline)
        armTimer(for: deadline)
        if http2.streamIDsExhausted { retire() }
    }

    /// The last stream id is used (after 2^30 requests): GOAWAY, finish the streams in flight, close. The pool
    /// replaces the connection; requests waiting here go back to it as refused (never sent).
    private func retire() {
        guard http2.goAwaySent == nil else { return }
        http2.goAway(code: .noError, debugData: Array(#"{"reason":"stream ids exhausted"}"#.utf8))
        delegate?.connectionGoAway(id: id, lastStreamID: 0, errorCode: .noError, reason: "stream ids exhausted")
        failWaiting(.refused)
        scheduleFlush()
    }

    /// Opens streams for waiting requests while the server allows.
    private func openWaiting() {
        while http2.canOpenStream, let key = waitingOrder.first {
            waitingOrder.removeFirst()
            guard let request = waiting.removeValue(forKey: key) else { continue }
            open(headers: request.headers, body: request.body, deadline: request.deadline, completion: request.completion)
        }
        if http2.goAwayReceived != nil || http2.goAwaySent != nil { failWaiting(.refused) }
        scheduleFlush()
    }

    private func failWaiting(_ failure: APNSStreamFailure) {
        let requests = waiting
        waiting.removeAll()
        waitingOrder.removeAll()
        for (_, request) in requests { request.completion.resume(returning: .failed(failure)) }
    }

    private func finish(_ stream: UInt32, _ result: APNSStreamResult) {
        exchanges.removeValue(forKey: stream)?.completion.resume(returning: result)
    }

    /// Arms the deadline timer for `deadline` unless it fires earlier already. Requests that end normally leave
    /// the timer alone: when it fires it finds what really expired and re-arms for the earliest deadline left
    /// (one scan per firing instead of a scheduled task per request).
    private func armTimer(for deadline: NIODeadline) {
        guard let context else { return }
        if let current = timerDeadline, current <= deadline { return }
        deadlineTimer?.cancel()
        timerDeadline = deadline
        deadlineTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.deadlinesPassed()
        }
    }

    private func deadlinesPassed() {
        deadlineTimer = nil
        timerDeadline = nil
        guard !closing else { return }
        let now = NIODeadline.now()
        var next: NIODeadline?
        var expired: [UInt32] = []
        for (stream, exchange) in exchanges {
            if exchange.deadline <= now {
                expired.append(stream)
            } else {
                next = min(next ?? exchange.deadline, exchange.deadline)
            }
        }
        var expiredWaiting: [Int] = []
        for (key, request) in waiting {
            if request.deadline <= now {
                expiredWaiting.append(key)
            } else {
                next = min(next ?? request.deadline, request.deadline)
            }
        }
        for key in expiredWaiting {
            waiting.removeValue(forKey: key)?.completion.resume(returning: .failed(.notSent))  // never sent: safe to retry
        }
        for stream in expired.sorted() {
            finish(stream, .failed(.timeout))
            http2.resetStream(stream, .cancel)
        }
        if let next { armTimer(for: next) }
        scheduleFlush()
    }

    // MARK: HTTP2ConnectionDelegate

    func http2PeerSettings(maxConcurrentStreams: Int?, first: Bool) {
        if first, let ready {
            self.ready = nil
            let value = min(maxConcurrentStreams ?? maxStreamsCap, maxStreamsCap)  // absent = unlimited
            maxStreams = value
            ready.succeed(Ready(maxStreams: value, handler: NIOLoopBound(self, eventLoop: context!.eventLoop)))
        } else if let limit = maxConcurrentStreams.map({ min($0, maxStreamsCap) }), limit != maxStreams {
            maxStreams = limit
            delegate?.connectionMaxStreamsChanged(id: id, maxStreams: limit)
        }
        openWaiting()
    }

    func http2Headers(_ headers: HPACKHeaders, stream: UInt32) {
        guard let index = exchanges.index(forKey: stream), exchanges.values[index].status == nil else { return }  // trailers are ignored
        var status: Int?
        var apnsID: String?
        var uniqueID: String?
        for (name, value, _) in headers {
            switch name {
            case ":status": status = Int(value)
            case "apns-id": apnsID = value
            case "apns-unique-id": uniqueID = value
            default: break
            }
        }
        guard let status, (100...599).contains(status) else {
            finish(stream, .failed(.protocolError))
            http2.resetStream(stream, .protocolError)
            return
        }
        if status < 200 { return }  // informational
        exchanges.values[index].status = status
        exchanges.values[index].apnsID = apnsID
        exchanges.values[index].uniqueID = uniqueID
    }

    func http2Data(_ data: ByteBuffer, stream: UInt32) {
        guard let index = exchanges.index(forKey: stream) else { return }
        if exchanges.values[index].body == nil {
            exchanges.values[index].body = data
        } else if exchanges.values[index].body!.readableBytes + data.readableBytes <= Self.maximumBodySize {
            var chunk = data
            exchanges.values[index].body!.writeBuffer(&chunk)
        }
    }

    func http2RemoteEnded(_ stream: UInt32) {}

    func http2StreamClosed(_ stream: UInt32, _ end: HTTP2StreamEnd) {
        if let exchange = exchanges[stream] {
            switch end {
            case .completed:
                if let status = exchange.status {
                    finish(stream, .response(status: status, apnsID: exchange.apnsID, uniqueID: exchange.uniqueID, body: exchange.body))
                } else {
                    finish(stream, .failed(.protocolError))
                }
            case .resetByPeer(.refusedStream), .refusedByGoAway:
                finish(stream, .failed(.refused))
            case .resetByPeer(let code):
                finish(stream, .failed(.reset(code)))
            case .resetLocally:
                finish(stream, .failed(.protocolError))  // the server broke a stream rule
            case .connectionError:
                finish(stream, .failed(.connectionLost))
            }
        }
        openWaiting()
    }

    func http2GoAway(lastStreamID: UInt32, code: HTTP2Wire.ErrorCode, debugData: ByteBuffer) {
        delegate?.connectionGoAway(id: id, lastStreamID: lastStreamID, errorCode: code, reason: Self.reason(fromDebugData: debugData))
    }

    func http2PingAcknowledged(_ opaque: UInt64) {
        pongTimeoutTask?.cancel()
        pongTimeoutTask = nil
    }

    // MARK: Output

    private func scheduleFlush() {
        guard !inReadLoop, !flushScheduled, let context else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.flushScheduled = false
            self.flush()
        }
    }

    /// Writes what HTTP/2 produced; closes once it is written when HTTP/2 is done (GOAWAY drained, protocol error).
    private func flush() {
        guard let context, !closing else { return }
        closing = http2.writeOutput(to: context)
    }

    private func record(_ error: APNSError) {
        if firstError == nil { firstError = error }
    }

    private func cancelTimers() {
        deadlineTimer?.cancel()
        deadlineTimer = nil
        timerDeadline = nil
        pingTask?.cancel()
        pingTask = nil
        pongTimeoutTask?.cancel()
        pongTimeoutTask = nil
    }

    private func schedulePingCheck(context: ChannelHandlerContext) {
        pingTask = context.eventLoop.assumeIsolated().scheduleTask(in: pingInterval) {
            self.pingCheck(context: context)
        }
    }

    private func pingCheck(context: ChannelHandlerContext) {
        guard context.channel.isActive, !closing else { return }
        if pongTimeoutTask == nil, NIODeadline.now() - lastActivity >= pingInterval {
            http2.ping(UInt64(truncatingIfNeeded: NIODeadline.now().uptimeNanoseconds))
            flush()
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
