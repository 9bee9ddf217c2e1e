import Locking
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOSSL
import NIOTLS

/// Receives connection events from the handler (on the connection's event loop), before the requests they
/// affect are resumed: a request that comes back not sent is never leased the same connection again.
protocol APNSConnectionDelegate: AnyObject, Sendable {
    func connectionMaxStreamsChanged(id: Int, maxStreams: Int)
    /// The first answer arrived: the server accepts this client (the pool's reconnect backoff resets).
    func connectionAnswered(id: Int)
    /// The connection takes no new streams: the server sent GOAWAY (`goAway`), or we are retiring it or closing
    /// it after an error (`error`).
    func connectionDraining(id: Int, goAway: APNSGoAway?, error: APNSError?)
    func connectionClosed(id: Int, error: APNSError?)
}

/// A GOAWAY from the server.
struct APNSGoAway: Sendable, Equatable {
    var lastStreamID: HTTP2StreamID
    var errorCode: HTTP2ErrorCode
    /// `reason` from the debug data (`{"reason":"BadCertificateEnvironment"}`), verbatim.
    var reason: String?
}

/// What happened to one HTTP/2 request on one stream.
enum APNSStreamResult: Sendable {
    case response(status: Int, apnsID: String?, uniqueID: String?, body: ByteBuffer?)
    case failed(APNSStreamFailure)
}

/// Why a stream ended without a response.
enum APNSStreamFailure: Sendable, Equatable {
    /// The request was never written: the connection was closing or closed. Safe to retry elsewhere.
    case notSent
    /// The request was never written: its deadline passed (or was too close to be worth writing) before a
    /// stream was free.
    case expired
    /// REFUSED_STREAM (`reason` nil), or above a GOAWAY's last-stream-id (with the GOAWAY's reason, if any): not
    /// processed. Safe to retry, unless the reason says otherwise.
    case refused(reason: String?)
    /// The deadline passed first; the stream was reset with CANCEL.
    case timeout
    /// The connection closed after the request was written: it may have been delivered.
    case connectionLost
    /// The server reset the stream with another error code.
    case reset(HTTP2ErrorCode)
    /// The server's answer was not a valid response.
    case protocolError
}

/// One connection to APNs, on its event loop, above swift-nio-http2's `NIOHTTP2Handler` in frame mode (no child
/// channel per stream): one stream per request with its deadline, requests waiting for a stream slot when the
/// server's MAX_CONCURRENT_STREAMS is reached, the server's SETTINGS and GOAWAY reported to the pool, a PING
/// when an idle connection has been quiet for `pingInterval` or a busy one for `inFlightReadTimeout` (nothing
/// read in time after it → close, the pool replaces the connection).
///
/// Every request's completion is resumed exactly once: with the response, or with why there is none (deadline,
/// reset, GOAWAY, connection end). The writes of one event-loop tick share one TLS write
/// (``APNSFlushCoalescingHandler``).
final class APNSConnectionHandler: ChannelInboundHandler, NIOHTTP2FrameDelegate {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    struct Ready: Sendable {
        let maxStreams: Int
        let handler: NIOLoopBound<APNSConnectionHandler>
    }

    /// Error bodies are tiny JSON; anything larger is cut (the reason is in the first bytes).
    static let maximumBodySize = 16 * 1024
    /// Our connection receive window: answers are small, but many arrive at once.
    static let connectionWindow = 1 << 20
    /// The stream limit NIO applies until the server announces one (a SETTINGS without MAX_CONCURRENT_STREAMS).
    static let defaultMaxStreams = 100
    /// A request whose deadline is closer than this is not written: its answer could not arrive in time, so
    /// writing it would only turn a certain "not sent" into an ambiguous "timeout".
    static let minimumTimeToWrite = TimeAmount.milliseconds(10)

    /// Who takes a request's result: a suspended task (``APNSConnection/execute(headers:body:deadline:)``)
    /// or a callback (``APNSConnection/submit(headers:body:deadline:then:)``, which a run of pushes uses
    /// instead of a task per push).
    enum Completion {
        case task(UnsafeContinuation<APNSStreamResult, Never>)
        case callback(@Sendable (APNSStreamResult) -> Void)

        func resume(returning result: APNSStreamResult) {
            switch self {
            case .task(let continuation): continuation.resume(returning: result)
            case .callback(let callback): callback(result)
            }
        }
    }

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
        var headers: HPACKHeaders
        var body: ByteBuffer
        var deadline: NIODeadline
        var completion: Completion
    }

    private let id: Int
    private let maxStreamsCap: Int
    private let pingInterval: TimeAmount
    private let pingTimeout: TimeAmount
    private let inFlightReadTimeout: TimeAmount
    private weak var delegate: (any APNSConnectionDelegate)?
    private var context: ChannelHandlerContext?
    private var ready: EventLoopPromise<Ready>?
    private var exchanges: [HTTP2StreamID: Exchange] = [:]
    private var waiting: [Int: Waiting] = [:]
    private var waitingOrder = CircularBuffer<Int>()
    private var nextWaitingID = 0
    private var firstError: APNSError?
    /// The server's stream limit (capped), known from its first SETTINGS.
    private var maxStreams = 0
    /// Streams NIO counts as open (created by our HEADERS, not closed yet): the number the server's limit applies to.
    private var openStreams = 0
    private var nextStreamID: HTTP2StreamID
    private var streamIDsExhausted = false
    /// The lowest last-stream-id of the server's GOAWAYs.
    private var goAwayReceived: HTTP2StreamID?
    private var goAwayReason: String?
    /// We sent GOAWAY (stream ids used up): finishing what is in flight, then closing.
    private var retiring = false
    /// NIO sent GOAWAY with this code: it found a connection error in the server's input.
    private var protocolErrorSent: HTTP2ErrorCode?
    /// DATA bytes received since the last connection WINDOW_UPDATE.
    private var unacknowledgedBytes = 0
    private var answered = false
    /// A frame was read since the last health check.
    private var sawInput = false
    /// When the health check last saw input (or the connection started).
    private var lastInput = NIODeadline.now()
    /// When the requests in flight started: the first one written after the connection had none.
    private var busySince = NIODeadline.now()
    /// Our PING in flight: any input after it shows the connection is alive.
    private var ping: (sentAt: NIODeadline, timeout: TimeAmount)?
    private var healthTask: Scheduled<Void>?
    /// One timer for all deadlines (requests and waiting requests), armed for the earliest known one.
    private var deadlineTimer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    private var closing = false
    private var closed = false

    init(
        id: Int, maxStreamsCap: Int, firstStreamID: UInt32 = 1, pingInterval: TimeAmount, pingTimeout: TimeAmount,
        inFlightReadTimeout: TimeAmount, delegate: any APNSConnectionDelegate, ready: EventLoopPromise<Ready>
    ) {
        self.id = id
        self.maxStreamsCap = maxStreamsCap
        self.nextStreamID = HTTP2StreamID(Int32(clamping: max(1, firstStreamID)) | 1)
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
        self.inFlightReadTimeout = inFlightReadTimeout
        self.delegate = delegate
        self.ready = ready
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // If readiness fails from outside (connect timeout), close the channel.
        ready?.futureResult.assumeIsolated().whenFailure { _ in context.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimers()
        // Normally empty by now (channelInactive ended everything); never leave a request waiting.
        closing = true
        failAll(streams: .connectionLost, waiting: .notSent)
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        // NIO wrote the preface; open our connection window beyond the default 64 KiB (TLS sends both once the
        // handshake is done).
        let increment = Self.connectionWindow - 65_535  // RFC 9113's initial window
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        sawInput = true
        switch frame.payload {
        case .headers(let headers):
            received(headers.headers, stream: frame.streamID, endStream: headers.endStream)
        case .data(let data):
            received(data, stream: frame.streamID)
        case .settings(.settings(let settings)):
            receivedSettings(settings)
        case .goAway(let lastStreamID, let errorCode, let debugData):
            receivedGoAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: debugData)
        default:
            // NIO answers PINGs and acknowledges SETTINGS; RST_STREAM arrives as a stream-closed event. Any frame,
            // a PING acknowledgement too, shows the connection is alive (`sawInput`).
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush()
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // NIO sends a few events per request; each is matched by its type before any cast (a failed cast of
        // `Any` cost more than the rest of this handler's work on the event).
        switch ObjectIdentifier(type(of: event)) {
        case ObjectIdentifier(NIOHTTP2StreamCreatedEvent.self):
            openStreams += 1
        case ObjectIdentifier(StreamClosedEvent.self):
            guard let closedEvent = event as? StreamClosedEvent else { break }
            openStreams -= 1
            streamClosed(closedEvent.streamID, reason: closedEvent.reason)
        case ObjectIdentifier(TLSUserEvent.self):
            if case TLSUserEvent.handshakeCompleted(let negotiatedProtocol)? = event as? TLSUserEvent, negotiatedProtocol != "h2" {
                closeConnection(APNSError(.tlsFailure, "server did not negotiate HTTP/2 via ALPN (got \(negotiatedProtocol ?? "none"))"))
            }
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            // NIO refused one of our frames for this stream: it did not go out as a request.
            finish(streamError.streamID, .failed(.notSent))
            return
        }
        if error is any NIOHTTP2Error, protocolErrorSent == nil {
            // A stream error in the server's input: NIO reset that stream (see `wroteFrame`); the connection lives on.
            return
        }
        if let code = protocolErrorSent {
            closeConnection(APNSError(.connectionLost, "HTTP/2 protocol error from the server (\(code)): \(error)"))
        } else {
            closeConnection(Self.classify(error))
        }
    }

    /// Closes the connection after an error: the pool stops leasing it at once, then the requests on it end
    /// (`connection-lost`; waiting ones `notSent`) when the channel is inactive.
    private func closeConnection(_ error: APNSError) {
        record(error)
        guard !closing, let context else { return }
        closing = true
        if ready == nil { delegate?.connectionDraining(id: id, goAway: nil, error: error) }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closing = true
        cancelTimers()
        failAll(streams: .connectionLost, waiting: .notSent)
        if let ready {
            self.ready = nil
            ready.fail(firstError ?? APNSError(.connectFailed, "connection closed before HTTP/2 settings were received"))
        } else if !closed {
            closed = true
            delegate?.connectionClosed(id: id, error: firstError)
        }
        context.fireChannelInactive()
    }

    // MARK: NIOHTTP2FrameDelegate

    /// Every frame NIO writes, ours and its own: its own RST_STREAM (a stream error in an answer) and GOAWAY
    /// (a connection error) are how we learn what it decided.
    func wroteFrame(_ frame: HTTP2Frame) {
        switch frame.payload {
        case .rstStream:
            finish(frame.streamID, .failed(.protocolError))  // ours were finished before they were written
        case .goAway(_, let errorCode, _) where errorCode != .noError:
            protocolErrorSent = errorCode
        default:
            break
        }
    }

    // MARK: Requests

    /// Sends one request (on the event loop). `completion` is resumed exactly once, with a response or a failure.
    func submit(headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline, completion: Completion) {
        guard !closing, context != nil else { return completion.resume(returning: .failed(.notSent)) }
        if goAwayReceived != nil || retiring { return completion.resume(returning: .failed(.refused(reason: goAwayReason))) }
        if waitingOrder.isEmpty, canOpenStream {
            open(headers: headers, body: body, deadline: deadline, completion: completion, now: .now())
            return
        }
        // The server's stream limit is reached (it lowered it below what the pool leased): wait for a slot.
        let key = nextWaitingID
        nextWaitingID += 1
        waiting[key] = Waiting(headers: headers, body: body, deadline: deadline, completion: completion)
        waitingOrder.append(key)
        armTimer(for: deadline)
    }

    private var canOpenStream: Bool {
        !closing && ready == nil && goAwayReceived == nil && !retiring && !streamIDsExhausted && openStreams < maxStreams
    }

    private func open(headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline, completion: Completion, now: NIODeadline) {
        guard let context else { return completion.resume(returning: .failed(.notSent)) }
        guard deadline - now >= Self.minimumTimeToWrite else { return completion.resume(returning: .failed(.expired)) }
        if exchanges.isEmpty { busySince = now }
        let stream = nextStreamID
        if Int32(stream) > Int32.max - 2 {
            streamIDsExhausted = true
        } else {
            nextStreamID = stream.advanced(by: 2)
        }
        exchanges[stream] = Exchange(completion: completion, deadline: deadline)
        armTimer(for: deadline)
        let hasBody = body.readableBytes > 0
        context.write(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .headers(.init(headers: headers, endStream: !hasBody)))), promise: nil)
        if hasBody {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        }
        // NIO holds DATA frames until a flush and then writes the flushed streams in hash order: flushed one
        // request at a time, they go out in stream order, so answers come back in order and NIO's stream tables
        // (arrays sorted by stream id) lose their first entry, not one in the middle. The flush coalescer below
        // NIO still makes one TLS write of a tick's requests.
        context.flush()
        if streamIDsExhausted { retire() }
    }

    /// The last stream id is used (after 2^30 requests): GOAWAY, finish the streams in flight, close. The pool
    /// replaces the connection; requests waiting here go back to it as refused (never sent).
    private func retire() {
        guard !retiring, let context else { return }
        retiring = true
        let debugData = context.channel.allocator.buffer(string: #"{"reason":"stream ids exhausted"}"#)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: .rootStream, errorCode: .noError, opaqueData: debugData))), promise: nil)
        delegate?.connectionDraining(id: id, goAway: nil, error: nil)
        failWaiting(.refused(reason: nil))
        flush()
        closeIfDrained()
    }

    /// Asked by the pool (the server said `IdleTimeout`): finish what is in flight, then close.
    func retireOnRequest() {
        guard !retiring, !closing, goAwayReceived == nil else { return }
        retire()
    }

    /// Opens streams for waiting requests while the server allows.
    private func openWaiting() {
        guard !waitingOrder.isEmpty else { return }
        let now = NIODeadline.now()
        while canOpenStream, let key = waitingOrder.first {
            waitingOrder.removeFirst()
            guard let request = waiting.removeValue(forKey: key) else { continue }
            open(headers: request.headers, body: request.body, deadline: request.deadline, completion: request.completion, now: now)
        }
        if goAwayReceived != nil || retiring { failWaiting(.refused(reason: goAwayReason)) }
        flush()
    }

    private func failWaiting(_ failure: APNSStreamFailure) {
        let requests = waiting
        waiting.removeAll()
        waitingOrder.removeAll()
        for (_, request) in requests { request.completion.resume(returning: .failed(failure)) }
    }

    private func failAll(streams failure: APNSStreamFailure, waiting waitingFailure: APNSStreamFailure) {
        let open = exchanges
        exchanges.removeAll()
        for stream in open.keys.sorted() { open[stream]!.completion.resume(returning: .failed(failure)) }
        failWaiting(waitingFailure)
    }

    private func finish(_ stream: HTTP2StreamID, _ result: APNSStreamResult) {
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
        guard !closing, let context else { return }
        let now = NIODeadline.now()
        var next: NIODeadline?
        let expired = Self.expired(exchanges, \.deadline, now: now, next: &next)
        let expiredWaiting = Self.expired(waiting, \.deadline, now: now, next: &next)
        for key in expiredWaiting {
            waiting.removeValue(forKey: key)?.completion.resume(returning: .failed(.expired))  // never written
        }
        for stream in expired.sorted() {
            finish(stream, .failed(.timeout))
            context.write(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .rstStream(.cancel))), promise: nil)
        }
        if let next { armTimer(for: next) }
        flush()
    }

    /// The keys of `table` whose deadline has passed at `now`; `next` becomes the soonest deadline
    /// still ahead (of these and what it held).
    private static func expired<Key, Value>(
        _ table: some Sequence<(key: Key, value: Value)>, _ deadline: (Value) -> NIODeadline, now: NIODeadline,
        next: inout NIODeadline?
    ) -> [Key] {
        var expired: [Key] = []
        for (key, value) in table {
            let due = deadline(value)
            if due <= now {
                expired.append(key)
            } else {
                next = min(next ?? due, due)
            }
        }
        return expired
    }

    // MARK: Input

    private func receivedSettings(_ settings: HTTP2Settings) {
        let announced = settings.last { $0.parameter == .maxConcurrentStreams }?.value
        if let ready, let context {
            self.ready = nil
            maxStreams = min(announced ?? Self.defaultMaxStreams, maxStreamsCap)
            lastInput = .now()
            scheduleHealthCheck(context: context)  // until now the connect timeout applies
            ready.succeed(Ready(maxStreams: maxStreams, handler: NIOLoopBound(self, eventLoop: context.eventLoop)))
        } else if let limit = announced.map({ min($0, maxStreamsCap) }), limit != maxStreams {
            maxStreams = limit
            delegate?.connectionMaxStreamsChanged(id: id, maxStreams: limit)
        }
        openWaiting()
    }

    private func received(_ headers: HPACKHeaders, stream: HTTP2StreamID, endStream: Bool) {
        guard let index = exchanges.index(forKey: stream) else { return }
        if exchanges.values[index].status == nil {  // a later block is trailers: ignored
            let fields = Self.responseFields(headers)
            if fields.apnsID != nil { exchanges.values[index].apnsID = fields.apnsID }
            if fields.uniqueID != nil { exchanges.values[index].uniqueID = fields.uniqueID }
            if let status = fields.status, status >= 200 { exchanges.values[index].status = status }
        }
        if endStream { completed(at: index) }
    }

    /// The three fields the client reads from a response header block, each taken only when well formed:
    /// `:status` as exactly three digits, once; `apns-id` and `apns-unique-id` as UUID text. NIO's own header
    /// block validation is off for this connection (`APNSConnection.http2Configuration`), so this is the
    /// check: anything else in the block is never read, and a field that fails is absent (a block without a
    /// status fails the push as a protocol error).
    static func responseFields(_ headers: HPACKHeaders) -> (status: Int?, apnsID: String?, uniqueID: String?) {
        var status: Int?
        var statuses = 0
        var apnsID: String?
        var uniqueID: String?
        for (name, value, _) in headers {
            switch name {
            case ":status":
                statuses += 1
                let digits = value.utf8
                if digits.count == 3, digits.allSatisfy({ $0 &- UInt8(ascii: "0") < 10 }) { status = Int(value) }
            case "apns-id": apnsID = Hex.isUUIDText(value) ? value : nil
            case "apns-unique-id": uniqueID = Hex.isUUIDText(value) ? value : nil
            default: break
            }
        }
        return (statuses == 1 ? status : nil, apnsID, uniqueID)
    }

    private func received(_ data: HTTP2Frame.FramePayload.Data, stream: HTTP2StreamID) {
        // Flow control counts padding too. Streams get at most one small answer each, so only the connection's
        // window needs topping up.
        unacknowledgedBytes += data.data.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0)
        if unacknowledgedBytes >= Self.connectionWindow / 2, let context {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledgedBytes))), promise: nil)
            unacknowledgedBytes = 0
        }
        guard let index = exchanges.index(forKey: stream) else { return }
        if case .byteBuffer(var chunk) = data.data, chunk.readableBytes > 0 {
            if exchanges.values[index].body == nil {
                exchanges.values[index].body = chunk
            } else if exchanges.values[index].body!.readableBytes + chunk.readableBytes <= Self.maximumBodySize {
                exchanges.values[index].body!.writeBuffer(&chunk)
            }
        }
        if data.endStream { completed(at: index) }
    }

    /// The server ended its side of the stream: the answer is complete. (By index: no second hash lookup.)
    private func completed(at index: Dictionary<HTTP2StreamID, Exchange>.Index) {
        let exchange = exchanges.remove(at: index).value
        if let status = exchange.status {
            if !answered {
                answered = true
                delegate?.connectionAnswered(id: id)
            }
            exchange.completion.resume(
                returning: .response(status: status, apnsID: exchange.apnsID, uniqueID: exchange.uniqueID, body: exchange.body))
        } else {
            exchange.completion.resume(returning: .failed(.protocolError))
        }
    }

    private func streamClosed(_ stream: HTTP2StreamID, reason: HTTP2ErrorCode?) {
        if let index = exchanges.index(forKey: stream) {
            switch reason {
            case nil: completed(at: index)
            case .refusedStream?: finish(stream, .failed(.refused(reason: nil)))
            case let code?: finish(stream, .failed(.reset(code)))
            }
        }
        openWaiting()
        closeIfDrained()
    }

    private func receivedGoAway(lastStreamID: HTTP2StreamID, errorCode: HTTP2ErrorCode, debugData: ByteBuffer?) {
        goAwayReceived = min(lastStreamID, goAwayReceived ?? .maxID)
        if let reason = debugData.flatMap(Self.reason(fromDebugData:)) { goAwayReason = reason }
        if ready == nil {
            delegate?.connectionDraining(
                id: id, goAway: APNSGoAway(lastStreamID: lastStreamID, errorCode: errorCode, reason: goAwayReason), error: nil)
        }
        // Streams above the last id were never processed (NIO closes them next, with CANCEL).
        for stream in exchanges.keys.sorted() where stream > lastStreamID { finish(stream, .failed(.refused(reason: goAwayReason))) }
        failWaiting(.refused(reason: goAwayReason))
        closeIfDrained()
    }

    /// After GOAWAY either way: close once no stream is left.
    private func closeIfDrained() {
        guard goAwayReceived != nil || retiring, openStreams == 0, exchanges.isEmpty, !closing, let context else { return }
        closing = true
        context.flush()
        context.close(promise: nil)
    }

    // MARK: Output

    private func flush() {
        if !closing { context?.flush() }
    }

    private func record(_ error: APNSError) {
        if firstError == nil { firstError = error }
    }

    private func cancelTimers() {
        deadlineTimer?.cancel()
        deadlineTimer = nil
        timerDeadline = nil
        healthTask?.cancel()
        healthTask = nil
    }

    // MARK: Health

    /// Checks twice per interval: a dead connection is noticed within about 2.5 intervals.
    private func scheduleHealthCheck(context: ChannelHandlerContext) {
        let period = TimeAmount.nanoseconds(max(min(pingInterval, inFlightReadTimeout).nanoseconds / 2, 1_000_000))
        healthTask = context.eventLoop.assumeIsolated().scheduleTask(in: period) {
            self.checkHealth(context: context)
        }
    }

    /// A PING when the connection has been quiet too long: `inFlightReadTimeout` with requests waiting on it (an
    /// answer is overdue), `pingInterval` when idle. Anything read after the PING shows the connection is alive;
    /// nothing read within its timeout closes it (a dead path, a hung server) and the pool replaces it. Requests
    /// then end at once (`connection-lost`) instead of at their deadlines, and no new one is sent into it.
    private func checkHealth(context: ChannelHandlerContext) {
        guard context.channel.isActive, !closing else { return }
        let now = NIODeadline.now()
        if sawInput {
            sawInput = false
            lastInput = now
            ping = nil
        }
        let busy = !exchanges.isEmpty
        if let ping {
            let timeout = busy ? min(ping.timeout, inFlightReadTimeout) : ping.timeout
            if now - ping.sentAt >= timeout {
                return closeConnection(APNSError(.connectionLost, "nothing read from the connection for \(timeout) after a PING"))
            }
        } else if busy, now - max(lastInput, busySince) >= inFlightReadTimeout {
            sendPing(now: now, timeout: inFlightReadTimeout, context: context)
        } else if now - lastInput >= pingInterval {
            sendPing(now: now, timeout: pingTimeout, context: context)
        }
        scheduleHealthCheck(context: context)
    }

    private func sendPing(now: NIODeadline, timeout: TimeAmount, context: ChannelHandlerContext) {
        ping = (now, timeout)
        let data = HTTP2PingData(withInteger: UInt64(truncatingIfNeeded: now.uptimeNanoseconds))
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(data, ack: false))), promise: nil)
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
