import NIOCore
import NIOHPACK

/// How a stream ended, as told to ``HTTP2ConnectionDelegate/http2StreamClosed(_:_:)``.
public enum HTTP2StreamEnd: Equatable, Sendable {
    /// Both sides ended it (END_STREAM each way).
    case completed
    /// The client sent RST_STREAM with this code.
    case resetByPeer(HTTP2Wire.ErrorCode)
    /// We reset it: the application asked (``HTTP2Connection/resetStream(_:_:)``) or the client broke a stream rule.
    case resetLocally(HTTP2Wire.ErrorCode)
    /// Above the last stream id of our GOAWAY: never processed (safe for the client to retry elsewhere).
    case refusedByGoAway
    /// The connection failed (a protocol error; GOAWAY sent, closing).
    case connectionError
}

/// What a server does with a stream the client opened.
public enum HTTP2Admission: Sendable {
    /// Keep it: its body and end follow.
    case accept
    /// Reset it with REFUSED_STREAM (safe for the client to retry).
    case refuse
    /// Say nothing: the connection is being dropped.
    case ignore
}

/// The application side of an ``HTTP2Connection``. Every call happens on the connection's event loop while it
/// processes input; the application may send (answer, reset) from inside these calls.
public protocol HTTP2ConnectionDelegate: AnyObject {
    /// A client opened `stream` with a well-formed request header block.
    func http2StreamOpened(_ stream: UInt32, headers: HPACKHeaders) -> HTTP2Admission
    /// Body bytes of an open stream.
    func http2Data(_ data: ByteBuffer, stream: UInt32)
    /// The client ended its side of the stream (END_STREAM), after all of its headers and data.
    func http2RemoteEnded(_ stream: UInt32)
    /// The stream is gone. Not called for streams refused before the application saw them.
    func http2StreamClosed(_ stream: UInt32, _ end: HTTP2StreamEnd)
}

/// The server side of one HTTP/2 connection (RFC 9113) at the byte level — the APNs simulator's: frames read
/// from the TLS plaintext, HPACK decoding and literal encoding, stream states, flow control both ways, SETTINGS,
/// PING, RST_STREAM and GOAWAY. Everything it sends goes into one output buffer that the connection writes once
/// per burst (``takeOutput()``).
///
/// Scope: request/response exchanges (APNs). No server push, no priorities (parsed and ignored), no CONNECT.
/// Protocol errors end the connection with GOAWAY and the RFC's code (``wantsClose``); stream errors reset
/// the stream. (The APNs client speaks HTTP/2 through swift-nio-http2; that the two are independent
/// implementations is what makes the client's tests against the simulator interoperability tests.)
public final class HTTP2Connection {
    /// Header blocks (HEADERS + CONTINUATION) above this end the connection (ENHANCE_YOUR_CALM).
    public static let maximumHeaderBlock = 65_536
    public static let highestStreamID: UInt32 = 0x7fff_ffff

    /// One stream that is not closed yet.
    struct Flow {
        var sendWindow: Int
        var receiveWindow: Int
        /// The peer sent END_STREAM.
        var remoteClosed: Bool
        /// Our END_STREAM is written or queued.
        var localClosed = false
        /// Bytes waiting for flow-control credit; the last of them ends the stream.
        var pending: ByteBuffer?
        var expectedLength: Int?
        var receivedLength = 0
    }

    public weak var delegate: (any HTTP2ConnectionDelegate)?

    /// The connection must close once the output is written (a connection error, or a GOAWAY either way with no
    /// stream left).
    public private(set) var wantsClose = false
    /// The last connection error, for the log.
    public private(set) var lastError: HTTP2Wire.ConnectionError?
    /// Last stream id of the GOAWAY we sent / received (the lowest, if several).
    public private(set) var goAwaySent: UInt32?
    public private(set) var goAwayReceived: UInt32?

    private(set) var streams: [UInt32: Flow] = [:]
    /// The highest stream id the client opened.
    private(set) var highestStreamID: UInt32 = 0

    private var reader: HTTP2Wire.FrameReader
    private var writer: HTTP2Wire.FrameWriter
    private var decoder: HPACKBlockDecoder
    private var peer = HTTP2Wire.PeerSettings()
    private let localStreamWindow: Int
    private let connectionWindowTarget: Int
    private var prefaceReceived = false
    private var settingsReceived = false
    private var headerBlock: (stream: UInt32, endStream: Bool, block: ByteBuffer)?
    private var connectionSendWindow = HTTP2Wire.defaultWindow
    private var connectionReceiveWindow = HTTP2Wire.defaultWindow
    /// Streams with bytes waiting for credit, in the order they blocked.
    private var blocked: [UInt32] = []
    /// MAX_CONCURRENT_STREAMS the client acknowledged, and the values of our SETTINGS not acknowledged
    /// yet (nil: that SETTINGS did not change it). Until acknowledged, the larger of old and new applies.
    private var acknowledgedMaxStreams = Int.max
    private var unacknowledgedMaxStreams: [Int?] = []

    /// - Parameters:
    ///   - settings: our SETTINGS (MAX_CONCURRENT_STREAMS, …); INITIAL_WINDOW_SIZE is added from `streamWindow`.
    ///   - streamWindow: receive window per stream.
    ///   - connectionWindow: receive window of the connection (topped up when half is used).
    public init(
        allocator: ByteBufferAllocator, settings: [(HTTP2Wire.Setting, Int)], streamWindow: Int,
        connectionWindow: Int, maxHeaderListSize: Int
    ) {
        self.localStreamWindow = streamWindow
        self.connectionWindowTarget = connectionWindow
        self.reader = HTTP2Wire.FrameReader(allocator: allocator)
        self.writer = HTTP2Wire.FrameWriter(allocator: allocator)
        // The announced header list size is advisory (RFC 9113 §6.5.2): refuse only far larger lists.
        self.decoder = HPACKBlockDecoder(maxTableSize: HTTP2Wire.defaultHeaderTableSize, maxHeaderListSize: maxHeaderListSize * 2)
        var all = settings
        all.append((.maxHeaderListSize, maxHeaderListSize))
        if streamWindow != HTTP2Wire.defaultWindow { all.append((.initialWindowSize, streamWindow)) }
        writer.settings(all)
        unacknowledgedMaxStreams.append(settings.first { $0.0 == .maxConcurrentStreams }?.1)
        if connectionWindow > HTTP2Wire.defaultWindow {
            writer.windowUpdate(stream: 0, increment: connectionWindow - HTTP2Wire.defaultWindow)
            connectionReceiveWindow = connectionWindow
        }
    }

    /// The output so far (nil when there is none); the caller writes it to the connection.
    public func takeOutput() -> ByteBuffer? {
        writer.take()
    }

    public var hasOutput: Bool { !writer.isEmpty }

    public var openStreamCount: Int { streams.count }

    public func isOpen(_ stream: UInt32) -> Bool { streams[stream] != nil }

    /// MAX_CONCURRENT_STREAMS in force (the acknowledged value, or a larger one announced since).
    public var localMaxConcurrentStreams: Int {
        unacknowledgedMaxStreams.reduce(acknowledgedMaxStreams) { max($0, $1 ?? 0) }
    }

    // MARK: Input

    /// Processes bytes from the peer; calls the delegate.
    public func receive(_ bytes: ByteBuffer) {
        guard !wantsClose else { return }
        reader.append(bytes)
        do throws(HTTP2Wire.ConnectionError) {
            if !prefaceReceived {
                switch reader.readClientPreface() {
                case nil: return
                case false?: throw HTTP2Wire.ConnectionError(.protocolError, "not an HTTP/2 connection preface")
                case true?: prefaceReceived = true
                }
            }
            while !wantsClose, let frame = try reader.next() {
                try handle(frame)
            }
        } catch {
            connectionError(error)
        }
    }

    private func handle(_ frame: HTTP2Wire.Frame) throws(HTTP2Wire.ConnectionError) {
        if !settingsReceived {
            guard frame.type == HTTP2Wire.FrameType.settings.rawValue, !frame.has(HTTP2Wire.Flag.ack) else {
                throw HTTP2Wire.ConnectionError(.protocolError, "the preface must start with SETTINGS")
            }
        }
        if let pending = headerBlock {
            guard frame.type == HTTP2Wire.FrameType.continuation.rawValue, frame.stream == pending.stream else {
                throw HTTP2Wire.ConnectionError(.protocolError, "expected CONTINUATION of stream \(pending.stream)")
            }
        }
        guard let type = HTTP2Wire.FrameType(rawValue: frame.type) else { return }  // unknown types are ignored
        switch type {
        case .data: try data(frame)
        case .headers: try headers(frame)
        case .priority:
            guard frame.stream != 0 else { throw HTTP2Wire.ConnectionError(.protocolError, "PRIORITY on stream 0") }
            guard frame.payload.readableBytes == 5 else { throw HTTP2Wire.ConnectionError(.frameSizeError, "PRIORITY of \(frame.payload.readableBytes) bytes") }
        case .rstStream: try rstStream(frame)
        case .settings: try settings(frame)
        case .pushPromise: throw HTTP2Wire.ConnectionError(.protocolError, "PUSH_PROMISE (push is disabled)")
        case .ping: try ping(frame)
        case .goAway: try goAway(frame)
        case .windowUpdate: try windowUpdate(frame)
        case .continuation: try continuation(frame)
        }
    }

    /// A stream id the client may have used: odd, up to the highest it opened.
    private func isKnown(_ stream: UInt32) -> Bool {
        stream & 1 == 1 && stream <= highestStreamID
    }

    private func headers(_ frame: HTTP2Wire.Frame) throws(HTTP2Wire.ConnectionError) {
        guard frame.stream != 0 else { throw HTTP2Wire.ConnectionError(.protocolError, "HEADERS on stream 0") }
        let block = try HTTP2Wire.unpadded(frame.payload, flags: frame.flags, priorityFields: frame.has(HTTP2Wire.Flag.priority))
        let endStream = frame.has(HTTP2Wire.Flag.endStream)
        if frame.has(HTTP2Wire.Flag.endHeaders) {
            try headerBlockComplete(stream: frame.stream, endStream: endStream, block: block)
        } else {
            headerBlock = (frame.stream, endStream, block)
        }
    }

    private func continuation(_ frame: HTTP2Wire.Frame) throws(HTTP2Wire.ConnectionError) {
        guard var pending = headerBlock else { throw HTTP2Wire.ConnectionError(.protocolError, "CONTINUATION without HEADERS") }
        guard pending.block.readableBytes + frame.payload.readableBytes <= Self.maximumHeaderBlock else {
            throw HTTP2Wire.ConnectionError(.enhanceYourCalm, "header block over \(Self.maximumHeaderBlock) bytes")
        }
        headerBlock = nil
        var more = frame.payload
        pending.block.writeBuffer(&more)
        if frame.has(HTTP2Wire.Flag.endHeaders) {
            try headerBlockComplete(stream: frame.stream, endStream: pending.endStream, block: pending.block)
        } else {
            headerBlock = pending
        }
    }

    private func headerBlockComplete(stream: UInt32, endStream: Bool, block: ByteBuffer) throws(HTTP2Wire.ConnectionError) {
        // Decode first, whatever happens to the stream: the HPACK state is the connection's.
        let headers: HPACKHeaders
        do {
            headers = try decoder.decode(block)
        } catch {
            throw HTTP2Wire.ConnectionError(.compressionError, "HPACK: \(error)")
        }
        guard stream & 1 == 1 else { throw HTTP2Wire.ConnectionError(.protocolError, "HEADERS on even stream \(stream)") }
        if stream > highestStreamID {
            return openedByClient(stream, headers: headers, endStream: endStream)
        }
        guard isKnown(stream) else { throw HTTP2Wire.ConnectionError(.protocolError, "HEADERS on idle stream \(stream)") }
        // Frames for a stream already closed (e.g. reset by us while they were in flight) are ignored.
        guard let index = streams.index(forKey: stream), !streams.values[index].remoteClosed else { return }
        guard endStream else {
            return resetStream(stream, .protocolError)  // trailers must end the request
        }
        streams.values[index].remoteClosed = true
        remoteEnded(stream)
    }

    /// A HEADERS that opens a stream.
    private func openedByClient(_ stream: UInt32, headers: HPACKHeaders, endStream: Bool) {
        highestStreamID = stream
        if let last = goAwaySent, stream > last { return writer.rstStream(stream, .refusedStream) }
        guard streams.count < localMaxConcurrentStreams else { return writer.rstStream(stream, .refusedStream) }
        guard let request = Self.checkRequest(headers) else { return writer.rstStream(stream, .protocolError) }
        streams[stream] = Flow(
            sendWindow: peer.initialWindow, receiveWindow: localStreamWindow, remoteClosed: endStream,
            expectedLength: request.contentLength
        )
        switch delegate?.http2StreamOpened(stream, headers: headers) ?? .refuse {
        case .accept:
            if endStream { remoteEnded(stream) }
        case .refuse:
            streams[stream] = nil
            writer.rstStream(stream, .refusedStream)
        case .ignore:
            streams[stream] = nil
        }
    }

    private func data(_ frame: HTTP2Wire.Frame) throws(HTTP2Wire.ConnectionError) {
        let stream = frame.stream
        guard stream != 0 else { throw HTTP2Wire.ConnectionError(.protocolError, "DATA on stream 0") }
        guard isKnown(stream) else { throw HTTP2Wire.ConnectionError(.protocolError, "DATA on idle stream \(stream)") }
        // Flow control counts the whole payload, padding included, even on closed streams.
        let length = frame.payload.readableBytes
        connectionReceiveWindow -= length
        guard connectionReceiveWindow >= 0 else { throw HTTP2Wire.ConnectionError(.flowControlError, "DATA beyond the connection window") }
        if connectionReceiveWindow < connectionWindowTarget / 2 {
            writer.windowUpdate(stream: 0, increment: connectionWindowTarget - connectionReceiveWindow)
            connectionReceiveWindow = connectionWindowTarget
        }
        let body = try HTTP2Wire.unpadded(frame.payload, flags: frame.flags, priorityFields: false)
        guard let index = streams.index(forKey: stream), !streams.values[index].remoteClosed else {
            return  // closed (e.g. reset while the frame was in flight): ignored
        }
        let endStream = frame.has(HTTP2Wire.Flag.endStream)
        streams.values[index].receiveWindow -= length
        guard streams.values[index].receiveWindow >= 0 else { return resetStream(stream, .flowControlError) }
        streams.values[index].receivedLength += body.readableBytes
        if endStream {
            streams.values[index].remoteClosed = true
        } else if streams.values[index].receiveWindow < localStreamWindow / 2 {
            writer.windowUpdate(stream: stream, increment: localStreamWindow - streams.values[index].receiveWindow)
            streams.values[index].receiveWindow = localStreamWindow
        }
        if body.readableBytes > 0 { delegate?.http2Data(body, stream: stream) }
        if endStream { remoteEnded(stream) }
    }

    /// END_STREAM from the peer: checks content-length, tells the delegate, closes the stream if we are done.
    private func remoteEnded(_ stream: UInt32) {
        guard let flow = streams[stream] else { return }
        if let expected = flow.expectedLength, expected != flow.receivedLength {
            return resetStream(stream, .protocolError)
        }
        delegate?.http2RemoteEnded(stream)
        closeIfDone(stream)
    }

    private func rstStream(_ frame: HTTP2Wire.Frame) throws(HTTP2Wire.ConnectionError) {
        guard frame.stream != 0 else { throw HTTP2Wire.ConnectionError(.protocolError, "RST_STREAM on stream 0") }
        guard frame.payload.readableBytes == 4 else {
            throw HTTP2Wire.ConnectionError(.frameSizeError, "RST_STREAM of \(frame.payload.readableBytes) bytes")
        }
        guard isKnown(frame.stream) else { throw HTTP2Wire.ConnectionError(.protocolError, "RST_STREAM on idle stream \(frame.stream)") }
        let raw = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt32.self)!
        removeStream(frame.stream, .resetByPeer(HTTP2Wire.ErrorCode(rawValue: raw) ?? .internalError))
    }

    private func settings(_ frame: HTTP2Wire.Frame) throws(HTTP2Wire.ConnectionError) {
        guard frame.stream == 0 else { throw HTTP2Wire.ConnectionError(.protocolError, "SETTINGS on stream \(frame.stream)") }
        if frame.has(HTTP2Wire.Flag.ack) {
            guard frame.payload.readableBytes == 0 else { throw HTTP2Wire.ConnectionError(.frameSizeError, "SETTINGS ACK with a payload") }
            if !unacknowledgedMaxStreams.isEmpty, let value = unacknowledgedMaxStreams.removeFirst() {
                acknowledgedMaxStreams = value
            }
            return
        }
        let change = try peer.apply(frame.payload)
        if change.headerTableSize { writer.confirmTableSize() }
        if change.windowDelta != 0 {
            for index in streams.indices {
                streams.values[index].sendWindow += change.windowDelta
                guard streams.values[index].sendWindow <= HTTP2Wire.maximumWindow else {
                    throw HTTP2Wire.ConnectionError(.flowControlError, "a stream window above 2^31-1")
                }
            }
        }
        writer.settingsAck()
        settingsReceived = true
        sendBlocked()
    }

    private func ping(_ frame: HTTP2Wire.Frame) throws(HTTP2Wire.ConnectionError) {
        guard frame.stream == 0 else { throw HTTP2Wire.ConnectionError(.protocolError, "PING on stream \(frame.stream)") }
        guard frame.payload.readableBytes == 8 else { throw HTTP2Wire.ConnectionError(.frameSizeError, "PING of \(frame.payload.readableBytes) bytes") }
        // We send no PINGs, so an acknowledgement is not expected and is ignored.
        if !frame.has(HTTP2Wire.Flag.ack) {
            writer.ping(frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt64.self)!, ack: true)
        }
    }

    private func goAway(_ frame: HTTP2Wire.Frame) throws(HTTP2Wire.ConnectionError) {
        guard frame.stream == 0 else { throw HTTP2Wire.ConnectionError(.protocolError, "GOAWAY on stream \(frame.stream)") }
        // The client's last-stream-id is about streams we would push: none. Its own streams still get answers.
        guard let rawLast = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt32.self), frame.payload.readableBytes >= 8 else {
            throw HTTP2Wire.ConnectionError(.frameSizeError, "GOAWAY shorter than 8 bytes")
        }
        goAwayReceived = min(rawLast & 0x7fff_ffff, goAwayReceived ?? .max)
        if streams.isEmpty { wantsClose = true }
    }

    private func windowUpdate(_ frame: HTTP2Wire.Frame) throws(HTTP2Wire.ConnectionError) {
        guard frame.payload.readableBytes == 4 else {
            throw HTTP2Wire.ConnectionError(.frameSizeError, "WINDOW_UPDATE of \(frame.payload.readableBytes) bytes")
        }
        let increment = Int(frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt32.self)! & 0x7fff_ffff)
        if frame.stream == 0 {
            guard increment > 0 else { throw HTTP2Wire.ConnectionError(.protocolError, "WINDOW_UPDATE of 0 on the connection") }
            connectionSendWindow += increment
            guard connectionSendWindow <= HTTP2Wire.maximumWindow else {
                throw HTTP2Wire.ConnectionError(.flowControlError, "connection window above 2^31-1")
            }
        } else {
            guard isKnown(frame.stream) else {
                throw HTTP2Wire.ConnectionError(.protocolError, "WINDOW_UPDATE on idle stream \(frame.stream)")
            }
            guard let index = streams.index(forKey: frame.stream) else { return }  // closed: allowed, ignored
            guard increment > 0 else { return resetStream(frame.stream, .protocolError) }
            streams.values[index].sendWindow += increment
            guard streams.values[index].sendWindow <= HTTP2Wire.maximumWindow else { return resetStream(frame.stream, .flowControlError) }
        }
        sendBlocked()
    }

    // MARK: Output

    /// Sends the answer to a request: HEADERS (`headers`: lowercase names, `:status` first) and then `body` as
    /// DATA (as flow control allows), ending the stream.
    public func send(stream: UInt32, headers: [(name: String, value: String)], body: ByteBuffer?) {
        guard let index = streams.index(forKey: stream), !streams.values[index].localClosed else { return }
        let hasBody = (body?.readableBytes ?? 0) > 0
        writer.headers(stream: stream, headers, endStream: !hasBody, maxFrameSize: peer.maxFrameSize)
        streams.values[index].localClosed = true
        if hasBody {
            streams.values[index].pending = body
            if !sendPending(stream) { blocked.append(stream) }
        } else {
            closeIfDone(stream)
        }
    }

    /// Resets a stream (the application's choice, e.g. a timeout) and forgets it; frames that were in flight for
    /// it are ignored.
    public func resetStream(_ stream: UInt32, _ code: HTTP2Wire.ErrorCode) {
        guard streams[stream] != nil else { return }
        writer.rstStream(stream, code)
        removeStream(stream, .resetLocally(code))
    }

    /// GOAWAY: streams above `lastStreamID` (default: the highest the peer opened) are refused from now on; once
    /// no stream is left the connection closes.
    public func goAway(lastStreamID: UInt32? = nil, code: HTTP2Wire.ErrorCode = .noError, debugData: [UInt8] = []) {
        let last = min(lastStreamID ?? highestStreamID, goAwaySent ?? .max)
        goAwaySent = last
        writer.goAway(lastStreamID: last, code: code, debugData: debugData)
        for stream in streams.keys.sorted() where stream > last { removeStream(stream, .refusedByGoAway) }
        if streams.isEmpty { wantsClose = true }
    }

    /// Announces a new MAX_CONCURRENT_STREAMS.
    public func announceMaxConcurrentStreams(_ limit: Int) {
        writer.settings([(.maxConcurrentStreams, limit)])
        unacknowledgedMaxStreams.append(limit)
    }

    private func connectionError(_ error: HTTP2Wire.ConnectionError) {
        guard !wantsClose else { return }
        lastError = error
        goAwaySent = min(highestStreamID, goAwaySent ?? .max)
        writer.goAway(lastStreamID: highestStreamID, code: error.code, debugData: Array(error.detail.utf8.prefix(256)))
        wantsClose = true
        for stream in streams.keys.sorted() { removeStream(stream, .connectionError) }
    }

    /// Ends every stream because the transport is gone (the caller saw the channel close).
    public func connectionClosed() {
        wantsClose = true
        for stream in streams.keys.sorted() { removeStream(stream, .connectionError) }
    }

    private func removeStream(_ stream: UInt32, _ end: HTTP2StreamEnd) {
        guard streams.removeValue(forKey: stream) != nil else { return }
        delegate?.http2StreamClosed(stream, end)
        if goAwaySent != nil || goAwayReceived != nil, streams.isEmpty { wantsClose = true }
    }

    private func closeIfDone(_ stream: UInt32) {
        guard let flow = streams[stream], flow.localClosed, flow.remoteClosed, flow.pending == nil else { return }
        removeStream(stream, .completed)
    }

    /// Sends as much of a stream's pending bytes as the windows allow; true when all of them are sent.
    private func sendPending(_ stream: UInt32) -> Bool {
        guard let index = streams.index(forKey: stream), var pending = streams.values[index].pending else { return true }
        streams.values[index].pending = nil
        while true {
            let credit = min(connectionSendWindow, streams.values[index].sendWindow, peer.maxFrameSize)
            let size = min(credit, pending.readableBytes)
            guard size > 0 else {
                streams.values[index].pending = pending
                return false
            }
            let chunk = pending.readSlice(length: size)!
            let last = pending.readableBytes == 0
            writer.frame(type: .data, flags: last ? HTTP2Wire.Flag.endStream : 0, stream: stream, payload: chunk)
            connectionSendWindow -= size
            streams.values[index].sendWindow -= size
            if last { break }
        }
        closeIfDone(stream)
        return true
    }

    private func sendBlocked() {
        guard !blocked.isEmpty else { return }
        let waiting = blocked
        blocked = []
        // Sending can close a stream, and the delegate may answer another one from that callback, which can block
        // and append here: keep those, after the ones still waiting from before.
        let stillBlocked = waiting.filter { !sendPending($0) }
        blocked.insert(contentsOf: stillBlocked, at: 0)
    }

    // MARK: Request header checks (RFC 9113 §8.2–8.3)

    public struct CheckedRequest {
        public var contentLength: Int?
    }

    /// The rules of a well-formed request header block; nil when malformed (a stream error).
    public static func checkRequest(_ headers: HPACKHeaders) -> CheckedRequest? {
        var result = CheckedRequest()
        var regularSeen = false
        var method = false
        var scheme = false
        var path = false
        var authority = false
        for (name, value, _) in headers {
            var utf8 = name.utf8.makeIterator()
            guard let first = utf8.next() else { return nil }
            // Names are told apart by length first, then one comparison (a `switch` over strings would compare
            // each name with every case in turn).
            let length = name.utf8.count
            if first == UInt8(ascii: ":") {
                guard !regularSeen else { return nil }
                if length == 7, name == ":method" {
                    guard !method, !value.isEmpty else { return nil }
                    method = true
                } else if length == 7, name == ":scheme" {
                    guard !scheme, !value.isEmpty else { return nil }
                    scheme = true
                } else if length == 5, name == ":path" {
                    guard !path, !value.isEmpty else { return nil }
                    path = true
                } else if length == 10, name == ":authority" {
                    guard !authority else { return nil }
                    authority = true
                } else {
                    return nil
                }
                continue
            }
            regularSeen = true
            guard isFieldNameByte(first) else { return nil }
            while let byte = utf8.next() {
                guard isFieldNameByte(byte) else { return nil }
            }
            switch length {
            case 2:
                if name == "te", value != "trailers" { return nil }
            case 7:
                if name == "upgrade" { return nil }
            case 10:
                if name == "connection" || name == "keep-alive" { return nil }
            case 14:
                if name == "content-length" {
                    guard let contentLength = Int(value), contentLength >= 0,
                        result.contentLength == nil || result.contentLength == contentLength
                    else { return nil }
                    result.contentLength = contentLength
                }
            case 16:
                if name == "proxy-connection" { return nil }
            case 17:
                if name == "transfer-encoding" { return nil }
            default:
                break
            }
        }
        guard method, scheme, path else { return nil }
        return result
    }

    /// A token character (RFC 9110 §5.6.2) that is not an uppercase letter (RFC 9113 §8.2.1).
    @inline(__always)
    static func isFieldNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"),
            UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}

extension HTTP2Connection {
    /// Writes the output so far on `context` (one write and flush) and, once the connection is done
    /// (``wantsClose``: GOAWAY drained or a protocol error), closes the channel after that write (a close
    /// fails unwritten data). Returns `true` when the channel is closing: write nothing more.
    public func writeOutput(to context: ChannelHandlerContext) -> Bool {
        let output = takeOutput()
        let close = wantsClose
        guard let output else {
            if close { context.close(promise: nil) }
            return close
        }
        if close {
            context.writeAndFlush(NIOAny(output)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        } else {
            context.writeAndFlush(NIOAny(output), promise: nil)
        }
        return close
    }
}
