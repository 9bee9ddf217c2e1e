import NIOCore
import NIOHPACK

/// HTTP/2 error codes (RFC 9113 §7).
enum HTTP2ErrorCode: UInt32, Sendable {
    case noError = 0x0
    case protocolError = 0x1
    case internalError = 0x2
    case flowControlError = 0x3
    case settingsTimeout = 0x4
    case streamClosed = 0x5
    case frameSizeError = 0x6
    case refusedStream = 0x7
    case cancel = 0x8
    case compressionError = 0x9
    case enhanceYourCalm = 0xb
}

/// What the application does with a stream the client opened.
enum HTTP2Admission {
    /// Keep it: its body and end follow.
    case accept
    /// Reset it with REFUSED_STREAM (safe for the client to retry).
    case refuse
    /// Say nothing: the connection is being dropped.
    case ignore
}

/// The application side of ``HTTP2ServerFraming``. Every call happens on the connection's event loop, while the
/// framing processes input; the application may answer (``HTTP2ServerFraming/respond(stream:headers:body:)``)
/// from inside these calls.
protocol HTTP2ServerFramingDelegate: AnyObject {
    /// A client opened `stream` with a valid request header block.
    func http2StreamOpened(_ stream: UInt32, headers: HPACKHeaders) -> HTTP2Admission
    /// Request body bytes of an accepted stream.
    func http2Data(_ data: ByteBuffer, stream: UInt32)
    /// The client ended its request (END_STREAM), after all of its data.
    func http2RequestEnded(_ stream: UInt32)
    /// The stream is gone: both sides ended it, or either side reset it. Not called for refused streams.
    func http2StreamClosed(_ stream: UInt32)
}

/// The server side of an HTTP/2 connection (RFC 9113) at the byte level, for the APNs simulator: frame parsing,
/// HPACK (NIOHPACK's decoder; answers encoded here without the dynamic table), stream states, flow control in both directions, SETTINGS, PING, RST_STREAM and GOAWAY.
///
/// The simulator used NIO's `NIOHTTP2Handler`; its general-purpose machinery (a frame value per frame, per-frame
/// pipeline writes, header validation in several passes) was most of the simulator's cost per push. This
/// implementation parses frames straight out of the TLS plaintext and writes every answer into one output
/// buffer that the connection flushes once per read burst. It is a server for clients that only open streams
/// (no server push, no CONNECT), which is all APNs is.
///
/// Protocol errors end the connection with GOAWAY and the RFC's error code; stream errors reset the stream.
final class HTTP2ServerFraming {
    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    static let defaultWindow = 65_535
    static let maximumWindow = Int(Int32.max)
    /// SETTINGS_MAX_FRAME_SIZE the simulator keeps (the protocol's default).
    static let localMaxFrameSize = 16_384
    /// Header blocks (HEADERS + CONTINUATION) above this end the connection (ENHANCE_YOUR_CALM).
    static let maximumHeaderBlock = 65_536

    enum FrameType: UInt8 {
        case data = 0x0, headers = 0x1, priority = 0x2, rstStream = 0x3, settings = 0x4, pushPromise = 0x5
        case ping = 0x6, goAway = 0x7, windowUpdate = 0x8, continuation = 0x9
    }

    enum Flag {
        static let endStream: UInt8 = 0x1
        static let ack: UInt8 = 0x1
        static let endHeaders: UInt8 = 0x4
        static let padded: UInt8 = 0x8
        static let priority: UInt8 = 0x20
    }

    enum Setting: UInt16 {
        case headerTableSize = 0x1, enablePush = 0x2, maxConcurrentStreams = 0x3, initialWindowSize = 0x4
        case maxFrameSize = 0x5, maxHeaderListSize = 0x6
    }

    /// One stream the client opened and that is not closed yet.
    struct Flow {
        var sendWindow: Int
        var receiveWindow: Int
        /// The client sent END_STREAM.
        var remoteClosed: Bool
        /// The answer's END_STREAM is written or queued.
        var localClosed = false
        /// Answer bytes waiting for flow-control credit; the last of them ends the stream.
        var pending: ByteBuffer?
        var expectedLength: Int?
        var receivedLength = 0
    }

    weak var delegate: (any HTTP2ServerFramingDelegate)?

    /// Bytes to send; the connection takes them with ``takeOutput()``.
    private(set) var output: ByteBuffer
    /// The connection must close once `output` is written (after a connection error or our GOAWAY with no
    /// streams left).
    private(set) var wantsClose = false
    /// The last connection error, for the log.
    private(set) var lastError: (code: HTTP2ErrorCode, detail: String)?

    private(set) var streams: [UInt32: Flow] = [:]
    private(set) var lastClientStreamID: UInt32 = 0
    private(set) var goAwayLastStreamID: UInt32?
    private(set) var peerSentGoAway = false

    private let allocator: ByteBufferAllocator
    private let localStreamWindow: Int
    private let connectionWindowTarget: Int
    private var inbound: ByteBuffer
    private var prefaceReceived = false
    private var settingsReceived = false
    private var headerBlock: (stream: UInt32, endStream: Bool, block: ByteBuffer)?
    private var decoder: HPACKDecoder
    /// The next header block we send starts with a dynamic table size update to 0 (we never index).
    private var needsTableSizeUpdate = true
    private var scratch: ByteBuffer

    private var connectionSendWindow = HTTP2ServerFraming.defaultWindow
    private var connectionReceiveWindow = HTTP2ServerFraming.defaultWindow
    private var peerInitialWindow = HTTP2ServerFraming.defaultWindow
    private var peerMaxFrameSize = HTTP2ServerFraming.localMaxFrameSize
    /// Streams with answer bytes waiting for credit, in the order they blocked.
    private var blocked: [UInt32] = []

    /// MAX_CONCURRENT_STREAMS the client has acknowledged, and the values of our SETTINGS not acknowledged yet
    /// (nil: that SETTINGS did not change it). Until acknowledged, the larger of old and new applies.
    private var acknowledgedMaxStreams: Int
    private var unacknowledgedMaxStreams: [Int?] = []

    init(allocator: ByteBufferAllocator, maxConcurrentStreams: Int, streamWindow: Int, connectionWindow: Int, maxHeaderListSize: Int) {
        self.allocator = allocator
        self.localStreamWindow = streamWindow
        self.connectionWindowTarget = connectionWindow
        // Until the client acknowledges our SETTINGS it may assume no limit (RFC 9113 §6.5.3).
        self.acknowledgedMaxStreams = .max
        self.output = allocator.buffer(capacity: 1024)
        self.inbound = allocator.buffer(capacity: 0)
        self.scratch = allocator.buffer(capacity: 256)
        // The decoder refuses lists far above the announced limit (the announced one is advisory: RFC 9113 §6.5.2).
        self.decoder = HPACKDecoder(
            allocator: allocator, maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize, maxHeaderListSize: maxHeaderListSize * 2
        )
        // The server preface: SETTINGS, then open the connection window beyond the protocol's 64 KiB.
        writeSettings([
            (.maxConcurrentStreams, maxConcurrentStreams), (.maxHeaderListSize, maxHeaderListSize),
            (.initialWindowSize, streamWindow),
        ])
        unacknowledgedMaxStreams.append(maxConcurrentStreams)
        if connectionWindow > Self.defaultWindow {
            writeWindowUpdate(stream: 0, increment: connectionWindow - Self.defaultWindow)
            connectionReceiveWindow = connectionWindow
        }
    }

    /// The output so far (nil when there is none); the caller writes it to the connection.
    func takeOutput() -> ByteBuffer? {
        guard output.readableBytes > 0 else { return nil }
        defer { output = allocator.buffer(capacity: 1024) }
        return output
    }

    var openStreamCount: Int { streams.count }

    /// MAX_CONCURRENT_STREAMS in force: the acknowledged value, or a larger one we announced since.
    var maxConcurrentStreams: Int {
        unacknowledgedMaxStreams.reduce(acknowledgedMaxStreams) { max($0, $1 ?? 0) }
    }

    // MARK: Input

    /// Processes bytes from the client; calls the delegate for requests.
    func receive(_ bytes: ByteBuffer) {
        guard !wantsClose else { return }
        var buffer: ByteBuffer
        if inbound.readableBytes == 0 {
            buffer = bytes
        } else {
            buffer = inbound
            var more = bytes
            buffer.writeBuffer(&more)
        }
        inbound = allocator.buffer(capacity: 0)
        if !prefaceReceived {
            guard buffer.readableBytes >= Self.preface.count else {
                if !buffer.readableBytesView.elementsEqual(Self.preface.prefix(buffer.readableBytes)) {
                    connectionError(.protocolError, "not an HTTP/2 connection preface")
                } else {
                    inbound = buffer
                }
                return
            }
            guard buffer.readBytes(length: Self.preface.count) == Self.preface else {
                connectionError(.protocolError, "not an HTTP/2 connection preface")
                return
            }
            prefaceReceived = true
        }
        while !wantsClose, buffer.readableBytes >= 9 {
            let start = buffer.readerIndex
            let length = Int(buffer.getInteger(at: start, as: UInt16.self)!) << 8 | Int(buffer.getInteger(at: start + 2, as: UInt8.self)!)
            guard length <= Self.localMaxFrameSize else {
                connectionError(.frameSizeError, "frame of \(length) bytes (maximum \(Self.localMaxFrameSize))")
                return
            }
            guard buffer.readableBytes >= 9 + length else { break }
            let type = buffer.getInteger(at: start + 3, as: UInt8.self)!
            let flags = buffer.getInteger(at: start + 4, as: UInt8.self)!
            let stream = buffer.getInteger(at: start + 5, as: UInt32.self)! & 0x7fff_ffff
            buffer.moveReaderIndex(forwardBy: 9)
            let payload = buffer.readSlice(length: length)!
            frame(type: type, flags: flags, stream: stream, payload: payload)
        }
        if !wantsClose, buffer.readableBytes > 0 { inbound = buffer }
    }

    private func frame(type rawType: UInt8, flags: UInt8, stream: UInt32, payload: ByteBuffer) {
        if !settingsReceived {
            guard rawType == FrameType.settings.rawValue, flags & Flag.ack == 0 else {
                connectionError(.protocolError, "the client preface must start with SETTINGS")
                return
            }
            settingsReceived = true
        }
        if let pending = headerBlock {
            guard rawType == FrameType.continuation.rawValue, stream == pending.stream else {
                connectionError(.protocolError, "expected CONTINUATION of stream \(pending.stream)")
                return
            }
        }
        guard let type = FrameType(rawValue: rawType) else { return }  // unknown frame types are ignored
        switch type {
        case .data: data(flags: flags, stream: stream, payload: payload)
        case .headers: headers(flags: flags, stream: stream, payload: payload)
        case .priority:
            guard stream != 0 else { return connectionError(.protocolError, "PRIORITY on stream 0") }
            guard payload.readableBytes == 5 else { return resetStream(stream, .frameSizeError) }
        case .rstStream: rstStream(stream: stream, payload: payload)
        case .settings: settings(flags: flags, stream: stream, payload: payload)
        case .pushPromise: connectionError(.protocolError, "PUSH_PROMISE from a client")
        case .ping: ping(flags: flags, stream: stream, payload: payload)
        case .goAway:
            guard stream == 0 else { return connectionError(.protocolError, "GOAWAY on stream \(stream)") }
            guard payload.readableBytes >= 8 else { return connectionError(.frameSizeError, "GOAWAY shorter than 8 bytes") }
            peerSentGoAway = true
        case .windowUpdate: windowUpdate(stream: stream, payload: payload)
        case .continuation: continuation(flags: flags, stream: stream, payload: payload)
        }
    }

    /// Strips padding; nil (after a connection error) when the padding is longer than the frame.
    private func unpadded(_ payload: ByteBuffer, flags: UInt8, priorityFields: Bool) -> ByteBuffer? {
        var body = payload
        var padding = 0
        if flags & Flag.padded != 0 {
            guard let length = body.readInteger(as: UInt8.self) else {
                connectionError(.frameSizeError, "padded frame without a pad length")
                return nil
            }
            padding = Int(length)
        }
        if priorityFields {
            guard body.readableBytes >= 5 else {
                connectionError(.frameSizeError, "HEADERS too short for its priority fields")
                return nil
            }
            body.moveReaderIndex(forwardBy: 5)
        }
        guard padding <= body.readableBytes else {
            connectionError(.protocolError, "padding longer than the frame")
            return nil
        }
        return body.readSlice(length: body.readableBytes - padding)
    }

    private func headers(flags: UInt8, stream: UInt32, payload: ByteBuffer) {
        guard stream != 0 else { return connectionError(.protocolError, "HEADERS on stream 0") }
        guard let block = unpadded(payload, flags: flags, priorityFields: flags & Flag.priority != 0) else { return }
        let endStream = flags & Flag.endStream != 0
        if flags & Flag.endHeaders != 0 {
            headerBlockComplete(stream: stream, endStream: endStream, block: block)
        } else {
            headerBlock = (stream, endStream, block)
        }
    }

    private func continuation(flags: UInt8, stream: UInt32, payload: ByteBuffer) {
        guard var pending = headerBlock else {
            return connectionError(.protocolError, "CONTINUATION without HEADERS")
        }
        guard pending.block.readableBytes + payload.readableBytes <= Self.maximumHeaderBlock else {
            return connectionError(.enhanceYourCalm, "header block over \(Self.maximumHeaderBlock) bytes")
        }
        headerBlock = nil
        var more = payload
        pending.block.writeBuffer(&more)
        if flags & Flag.endHeaders != 0 {
            headerBlockComplete(stream: stream, endStream: pending.endStream, block: pending.block)
        } else {
            headerBlock = pending
        }
    }

    private func headerBlockComplete(stream: UInt32, endStream: Bool, block: ByteBuffer) {
        // Decode first, whatever happens to the stream: the HPACK state is the connection's.
        var block = block
        let headers: HPACKHeaders
        do {
            headers = try decoder.decodeHeaders(from: &block)
        } catch {
            return connectionError(.compressionError, "HPACK: \(error)")
        }
        guard stream & 1 == 1 else { return connectionError(.protocolError, "client stream id \(stream) is even") }
        if stream > lastClientStreamID {
            lastClientStreamID = stream
            if let last = goAwayLastStreamID, stream > last { return writeRstStream(stream, .refusedStream) }
            guard streams.count < maxConcurrentStreams else { return writeRstStream(stream, .refusedStream) }
            guard let request = Self.checkRequest(headers) else { return writeRstStream(stream, .protocolError) }
            streams[stream] = Flow(
                sendWindow: peerInitialWindow, receiveWindow: localStreamWindow, remoteClosed: endStream,
                expectedLength: request.contentLength
            )
            switch delegate?.http2StreamOpened(stream, headers: headers) ?? .refuse {
            case .accept:
                if endStream { requestEnded(stream) }
            case .refuse:
                streams[stream] = nil
                writeRstStream(stream, .refusedStream)
            case .ignore:
                streams[stream] = nil
            }
        } else if let index = streams.index(forKey: stream), !streams.values[index].remoteClosed {
            // Trailers: they must end the request; their content is not used.
            guard endStream else { return resetStream(stream, .protocolError) }
            streams.values[index].remoteClosed = true
            requestEnded(stream)
        } else {
            resetStream(stream, .streamClosed)
        }
    }

    private func data(flags: UInt8, stream: UInt32, payload: ByteBuffer) {
        guard stream != 0 else { return connectionError(.protocolError, "DATA on stream 0") }
        guard stream <= lastClientStreamID else { return connectionError(.protocolError, "DATA on idle stream \(stream)") }
        // Flow control counts the whole payload, padding included.
        let length = payload.readableBytes
        connectionReceiveWindow -= length
        guard connectionReceiveWindow >= 0 else {
            return connectionError(.flowControlError, "DATA beyond the connection window")
        }
        if connectionReceiveWindow < connectionWindowTarget / 2 {
            writeWindowUpdate(stream: 0, increment: connectionWindowTarget - connectionReceiveWindow)
            connectionReceiveWindow = connectionWindowTarget
        }
        guard let body = unpadded(payload, flags: flags, priorityFields: false) else { return }
        guard let index = streams.index(forKey: stream), !streams.values[index].remoteClosed else {
            return resetStream(stream, .streamClosed)
        }
        let endStream = flags & Flag.endStream != 0
        streams.values[index].receiveWindow -= length
        guard streams.values[index].receiveWindow >= 0 else { return resetStream(stream, .flowControlError) }
        streams.values[index].receivedLength += body.readableBytes
        if endStream {
            streams.values[index].remoteClosed = true
        } else if streams.values[index].receiveWindow < localStreamWindow / 2 {
            writeWindowUpdate(stream: stream, increment: localStreamWindow - streams.values[index].receiveWindow)
            streams.values[index].receiveWindow = localStreamWindow
        }
        if body.readableBytes > 0 { delegate?.http2Data(body, stream: stream) }
        if endStream { requestEnded(stream) }
    }

    /// END_STREAM from the client: checks content-length, then tells the delegate.
    private func requestEnded(_ stream: UInt32) {
        guard let flow = streams[stream] else { return }
        if let expected = flow.expectedLength, expected != flow.receivedLength {
            return resetStream(stream, .protocolError)
        }
        delegate?.http2RequestEnded(stream)
        closeIfDone(stream)
    }

    private func rstStream(stream: UInt32, payload: ByteBuffer) {
        guard stream != 0 else { return connectionError(.protocolError, "RST_STREAM on stream 0") }
        guard payload.readableBytes == 4 else { return connectionError(.frameSizeError, "RST_STREAM of \(payload.readableBytes) bytes") }
        guard stream <= lastClientStreamID else { return connectionError(.protocolError, "RST_STREAM on idle stream \(stream)") }
        removeStream(stream)
    }

    private func settings(flags: UInt8, stream: UInt32, payload: ByteBuffer) {
        guard stream == 0 else { return connectionError(.protocolError, "SETTINGS on stream \(stream)") }
        if flags & Flag.ack != 0 {
            guard payload.readableBytes == 0 else { return connectionError(.frameSizeError, "SETTINGS ACK with a payload") }
            if !unacknowledgedMaxStreams.isEmpty, let value = unacknowledgedMaxStreams.removeFirst() {
                acknowledgedMaxStreams = value
            }
            return
        }
        guard payload.readableBytes % 6 == 0 else { return connectionError(.frameSizeError, "SETTINGS length not a multiple of 6") }
        var body = payload
        while let identifier = body.readInteger(as: UInt16.self), let value = body.readInteger(as: UInt32.self) {
            switch Setting(rawValue: identifier) {
            case .headerTableSize:
                // We never use the dynamic table; confirm its size of 0 in the next header block.
                needsTableSizeUpdate = true
            case .enablePush:
                guard value <= 1 else { return connectionError(.protocolError, "SETTINGS_ENABLE_PUSH \(value)") }
            case .initialWindowSize:
                guard value <= UInt32(Self.maximumWindow) else {
                    return connectionError(.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE \(value)")
                }
                let delta = Int(value) - peerInitialWindow
                peerInitialWindow = Int(value)
                for index in streams.indices {
                    streams.values[index].sendWindow += delta
                    if streams.values[index].sendWindow > Self.maximumWindow {
                        return connectionError(.flowControlError, "a stream window above 2^31-1")
                    }
                }
            case .maxFrameSize:
                guard value >= 16_384, value <= 16_777_215 else {
                    return connectionError(.protocolError, "SETTINGS_MAX_FRAME_SIZE \(value)")
                }
                peerMaxFrameSize = Int(value)
            case .maxConcurrentStreams, .maxHeaderListSize, nil:
                break  // limits on what we send or unknown: nothing to do for a server that only answers
            }
        }
        writeFrameHeader(length: 0, type: .settings, flags: Flag.ack, stream: 0)
        sendBlocked()
    }

    private func ping(flags: UInt8, stream: UInt32, payload: ByteBuffer) {
        guard stream == 0 else { return connectionError(.protocolError, "PING on stream \(stream)") }
        guard payload.readableBytes == 8 else { return connectionError(.frameSizeError, "PING of \(payload.readableBytes) bytes") }
        guard flags & Flag.ack == 0 else { return }
        writeFrameHeader(length: 8, type: .ping, flags: Flag.ack, stream: 0)
        var opaque = payload
        output.writeBuffer(&opaque)
    }

    private func windowUpdate(stream: UInt32, payload: ByteBuffer) {
        guard payload.readableBytes == 4 else { return connectionError(.frameSizeError, "WINDOW_UPDATE of \(payload.readableBytes) bytes") }
        let increment = Int(payload.getInteger(at: payload.readerIndex, as: UInt32.self)! & 0x7fff_ffff)
        if stream == 0 {
            guard increment > 0 else { return connectionError(.protocolError, "WINDOW_UPDATE of 0 on the connection") }
            connectionSendWindow += increment
            guard connectionSendWindow <= Self.maximumWindow else {
                return connectionError(.flowControlError, "connection window above 2^31-1")
            }
        } else {
            guard stream <= lastClientStreamID else { return connectionError(.protocolError, "WINDOW_UPDATE on idle stream \(stream)") }
            guard let index = streams.index(forKey: stream) else { return }  // closed: allowed, ignored
            guard increment > 0 else { return resetStream(stream, .protocolError) }
            streams.values[index].sendWindow += increment
            guard streams.values[index].sendWindow <= Self.maximumWindow else { return resetStream(stream, .flowControlError) }
        }
        sendBlocked()
    }

    // MARK: Output

    /// Answers a stream: HEADERS (`headers`: lowercase names, `:status` first), then `body` as DATA (as flow
    /// control allows) ending the stream.
    func respond(stream: UInt32, headers: [(name: String, value: String)], body: ByteBuffer?) {
        guard let index = streams.index(forKey: stream), !streams.values[index].localClosed else { return }
        scratch.clear()
        encodeHeaderBlock(headers, into: &scratch)
        var block = scratch
        var first = true
        repeat {
            let chunk = block.readSlice(length: min(block.readableBytes, peerMaxFrameSize))!
            var flags: UInt8 = block.readableBytes == 0 ? Flag.endHeaders : 0
            if first, body == nil { flags |= Flag.endStream }
            writeFrame(type: first ? .headers : .continuation, flags: flags, stream: stream, payload: chunk)
            first = false
        } while block.readableBytes > 0
        streams.values[index].localClosed = true
        if let body {
            streams.values[index].pending = body
            if !sendPending(stream) { blocked.append(stream) }
        } else {
            closeIfDone(stream)
        }
    }

    // MARK: HPACK for answers

    /// `:status` values in HPACK's static table (RFC 7541 Appendix A).
    private static let statusIndex: [String: UInt8] = ["200": 8, "204": 9, "206": 10, "304": 11, "400": 12, "404": 13, "500": 14]

    /// Encodes an answer's headers without the dynamic table: `:status` indexed when the static table has it,
    /// everything else as literals without indexing and without Huffman coding (the answers are a few short
    /// headers; NIOHPACK's general encoder was ~10 % of the simulator's time). A dynamic table size update to 0
    /// opens the first block and every block after the client changed SETTINGS_HEADER_TABLE_SIZE, so decoders
    /// that wait for one after a smaller setting (nghttp2) are satisfied.
    private func encodeHeaderBlock(_ headers: [(name: String, value: String)], into buffer: inout ByteBuffer) {
        if needsTableSizeUpdate {
            buffer.writeInteger(UInt8(0x20))
            needsTableSizeUpdate = false
        }
        for (name, value) in headers {
            if name == ":status" {
                if let index = Self.statusIndex[value] {
                    buffer.writeInteger(0x80 | index)
                    continue
                }
                buffer.writeInteger(UInt8(0x08))  // literal without indexing, name = static entry 8
            } else {
                buffer.writeInteger(UInt8(0x00))  // literal without indexing, literal name
                Self.writeHPACKString(name, into: &buffer)
            }
            Self.writeHPACKString(value, into: &buffer)
        }
    }

    private static func writeHPACKString(_ text: String, into buffer: inout ByteBuffer) {
        let length = text.utf8.count
        if length < 127 {
            buffer.writeInteger(UInt8(length))
        } else {
            buffer.writeInteger(UInt8(127))
            var rest = length - 127
            while rest >= 128 {
                buffer.writeInteger(UInt8(rest & 0x7f | 0x80))
                rest >>= 7
            }
            buffer.writeInteger(UInt8(rest))
        }
        buffer.writeString(text)
    }

    /// Resets a stream (stream error or the application's choice) and forgets it.
    func resetStream(_ stream: UInt32, _ code: HTTP2ErrorCode) {
        writeRstStream(stream, code)
        removeStream(stream)
    }

    /// GOAWAY: streams above `lastStreamID` (default: the last one the client opened) are refused from now on.
    /// When no stream is left the connection closes.
    func goAway(lastStreamID: UInt32? = nil, code: HTTP2ErrorCode = .noError, debugData: [UInt8] = []) {
        let last = min(lastStreamID ?? lastClientStreamID, goAwayLastStreamID ?? .max)
        goAwayLastStreamID = last
        writeFrameHeader(length: 8 + debugData.count, type: .goAway, flags: 0, stream: 0)
        output.writeInteger(last)
        output.writeInteger(code.rawValue)
        output.writeBytes(debugData)
        for stream in Array(streams.keys) where stream > last { removeStream(stream) }
        if streams.isEmpty { wantsClose = true }
    }

    /// Announces a new MAX_CONCURRENT_STREAMS.
    func announceMaxConcurrentStreams(_ limit: Int) {
        writeSettings([(.maxConcurrentStreams, limit)])
        unacknowledgedMaxStreams.append(limit)
    }

    private func connectionError(_ code: HTTP2ErrorCode, _ detail: String) {
        guard !wantsClose else { return }
        lastError = (code, detail)
        goAway(code: code, debugData: Array(detail.utf8.prefix(256)))
        for stream in Array(streams.keys) { removeStream(stream) }
        wantsClose = true
    }

    private func removeStream(_ stream: UInt32) {
        guard streams.removeValue(forKey: stream) != nil else { return }
        delegate?.http2StreamClosed(stream)
        if goAwayLastStreamID != nil, streams.isEmpty { wantsClose = true }
    }

    private func closeIfDone(_ stream: UInt32) {
        guard let flow = streams[stream], flow.localClosed, flow.remoteClosed, flow.pending == nil else { return }
        removeStream(stream)
    }

    /// Sends as much of a stream's pending answer as the windows allow; true when all of it is sent.
    private func sendPending(_ stream: UInt32) -> Bool {
        guard let index = streams.index(forKey: stream), var pending = streams.values[index].pending else { return true }
        streams.values[index].pending = nil
        while true {
            let credit = min(connectionSendWindow, streams.values[index].sendWindow, peerMaxFrameSize)
            let size = min(credit, pending.readableBytes)
            // An empty final DATA needs no credit; otherwise wait for some.
            guard size > 0 || pending.readableBytes == 0 else {
                streams.values[index].pending = pending
                return false
            }
            let chunk = pending.readSlice(length: size)!
            let last = pending.readableBytes == 0
            writeFrame(type: .data, flags: last ? Flag.endStream : 0, stream: stream, payload: chunk)
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
        blocked = waiting.filter { !sendPending($0) }
    }

    private func writeSettings(_ settings: [(Setting, Int)]) {
        writeFrameHeader(length: 6 * settings.count, type: .settings, flags: 0, stream: 0)
        for (setting, value) in settings {
            output.writeInteger(setting.rawValue)
            output.writeInteger(UInt32(value))
        }
    }

    private func writeWindowUpdate(stream: UInt32, increment: Int) {
        writeFrameHeader(length: 4, type: .windowUpdate, flags: 0, stream: stream)
        output.writeInteger(UInt32(increment))
    }

    private func writeRstStream(_ stream: UInt32, _ code: HTTP2ErrorCode) {
        writeFrameHeader(length: 4, type: .rstStream, flags: 0, stream: stream)
        output.writeInteger(code.rawValue)
    }

    private func writeFrame(type: FrameType, flags: UInt8, stream: UInt32, payload: ByteBuffer) {
        writeFrameHeader(length: payload.readableBytes, type: type, flags: flags, stream: stream)
        var bytes = payload
        output.writeBuffer(&bytes)
    }

    private func writeFrameHeader(length: Int, type: FrameType, flags: UInt8, stream: UInt32) {
        output.writeInteger(UInt8(truncatingIfNeeded: length >> 16))
        output.writeInteger(UInt16(truncatingIfNeeded: length))
        output.writeInteger(type.rawValue)
        output.writeInteger(flags)
        output.writeInteger(stream)
    }

    // MARK: Request header checks (RFC 9113 §8.2–8.3)

    struct CheckedRequest {
        var contentLength: Int?
    }

    /// The rules of a well-formed request header block; nil when malformed (a stream error).
    static func checkRequest(_ headers: HPACKHeaders) -> CheckedRequest? {
        var result = CheckedRequest()
        var regularSeen = false
        var method = false
        var scheme = false
        var path = false
        var authority = false
        for (name, value, _) in headers {
            var utf8 = name.utf8.makeIterator()
            guard let first = utf8.next() else { return nil }
            if first == UInt8(ascii: ":") {
                guard !regularSeen else { return nil }
                switch name {
                case ":method":
                    guard !method, !value.isEmpty else { return nil }
                    method = true
                case ":scheme":
                    guard !scheme, !value.isEmpty else { return nil }
                    scheme = true
                case ":path":
                    guard !path, !value.isEmpty else { return nil }
                    path = true
                case ":authority":
                    guard !authority else { return nil }
                    authority = true
                default:
                    return nil
                }
                continue
            }
            regularSeen = true
            guard Self.isFieldNameByte(first) else { return nil }
            while let byte = utf8.next() {
                guard Self.isFieldNameByte(byte) else { return nil }
            }
            switch name {
            case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
                return nil
            case "te":
                guard value == "trailers" else { return nil }
            case "content-length":
                guard let length = Int(value), length >= 0, result.contentLength == nil || result.contentLength == length else {
                    return nil
                }
                result.contentLength = length
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
