import NIOCore

/// The byte level of HTTP/2 (RFC 9113) under the APNs simulator's server (``HTTP2Connection``): frame reading
/// and writing, padding, SETTINGS, and an HPACK encoder for answers that never uses the dynamic table. Each
/// exchange is one request and one short answer.
///
/// The simulator used NIO's `NIOHTTP2Handler`, whose general-purpose layers (a frame value and a pipeline write
/// per frame, header validation in several passes) were most of its cost per push; this is the part of HTTP/2
/// it actually uses, written straight against `ByteBuffer`s.
public enum HTTP2Wire {
    public static let clientPreface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    public static let defaultWindow = 65_535
    public static let maximumWindow = Int(Int32.max)
    public static let defaultMaxFrameSize = 16_384
    /// SETTINGS_HEADER_TABLE_SIZE's default (RFC 9113 §6.5.2): the HPACK table the peer may use; never changed here.
    public static let defaultHeaderTableSize = 4_096
    public static let frameHeaderLength = 9

    /// Error codes (RFC 9113 §7).
    public enum ErrorCode: UInt32, Sendable {
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
        case connectError = 0xa
        case enhanceYourCalm = 0xb
        case inadequateSecurity = 0xc
        case http11Required = 0xd
    }

    public enum FrameType: UInt8, Sendable {
        case data = 0x0, headers = 0x1, priority = 0x2, rstStream = 0x3, settings = 0x4, pushPromise = 0x5
        case ping = 0x6, goAway = 0x7, windowUpdate = 0x8, continuation = 0x9
    }

    public enum Flag {
        public static let endStream: UInt8 = 0x1
        public static let ack: UInt8 = 0x1
        public static let endHeaders: UInt8 = 0x4
        public static let padded: UInt8 = 0x8
        public static let priority: UInt8 = 0x20
    }

    public enum Setting: UInt16, Sendable {
        case headerTableSize = 0x1, enablePush = 0x2, maxConcurrentStreams = 0x3, initialWindowSize = 0x4
        case maxFrameSize = 0x5, maxHeaderListSize = 0x6
    }

    /// A connection error: GOAWAY with this code, then close.
    public struct ConnectionError: Error, Sendable {
        public var code: ErrorCode
        public var detail: String

        public init(_ code: ErrorCode, _ detail: String) {
            self.code = code
            self.detail = detail
        }
    }

    /// One frame; `type` is raw so unknown types can be skipped.
    public struct Frame {
        public var type: UInt8
        public var flags: UInt8
        public var stream: UInt32
        public var payload: ByteBuffer

        public func has(_ flag: UInt8) -> Bool { flags & flag != 0 }
    }

    // MARK: Reading

    /// Cuts whole frames out of a byte stream.
    public struct FrameReader {
        private var buffer: ByteBuffer
        private let allocator: ByteBufferAllocator
        /// Our SETTINGS_MAX_FRAME_SIZE: longer frames are a connection error.
        public let maxFrameSize: Int

        public init(allocator: ByteBufferAllocator, maxFrameSize: Int = HTTP2Wire.defaultMaxFrameSize) {
            self.allocator = allocator
            self.buffer = allocator.buffer(capacity: 0)
            self.maxFrameSize = maxFrameSize
        }

        public mutating func append(_ bytes: ByteBuffer) {
            if buffer.readableBytes == 0 {
                buffer = bytes
            } else {
                // A read ended inside a frame. Drop what was consumed before growing: otherwise, as long as reads
                // keep ending inside frames, the buffer carries (and copies, once a slice of it is kept) every
                // byte since the last read that ended on a frame boundary.
                buffer.discardReadBytes()
                var more = bytes
                buffer.writeBuffer(&more)
            }
        }

        /// The client preface, when the server expects it: true once read, false if the bytes differ, nil while
        /// incomplete.
        public mutating func readClientPreface() -> Bool? {
            let available = min(buffer.readableBytes, clientPreface.count)
            guard buffer.readableBytesView.prefix(available).elementsEqual(clientPreface.prefix(available)) else { return false }
            guard available == clientPreface.count else { return nil }
            buffer.moveReaderIndex(forwardBy: available)
            return true
        }

        /// The next whole frame; nil when more bytes are needed.
        public mutating func next() throws(ConnectionError) -> Frame? {
            guard buffer.readableBytes >= frameHeaderLength else {
                release()
                return nil
            }
            let start = buffer.readerIndex
            let length = Int(buffer.getInteger(at: start, as: UInt16.self)!) << 8 | Int(buffer.getInteger(at: start + 2, as: UInt8.self)!)
            guard length <= maxFrameSize else {
                throw ConnectionError(.frameSizeError, "frame of \(length) bytes (maximum \(maxFrameSize))")
            }
            guard buffer.readableBytes >= frameHeaderLength + length else { return nil }
            let type = buffer.getInteger(at: start + 3, as: UInt8.self)!
            let flags = buffer.getInteger(at: start + 4, as: UInt8.self)!
            let stream = buffer.getInteger(at: start + 5, as: UInt32.self)! & 0x7fff_ffff
            buffer.moveReaderIndex(forwardBy: frameHeaderLength)
            return Frame(type: type, flags: flags, stream: stream, payload: buffer.readSlice(length: length)!)
        }

        /// Bytes the reader holds, read or not (tests).
        var retainedBytes: Int { buffer.writerIndex }

        /// Drops the reference to a fully read input buffer.
        private mutating func release() {
            if buffer.readableBytes == 0, buffer.capacity > 0 { buffer = allocator.buffer(capacity: 0) }
        }
    }

    /// A DATA or HEADERS payload without its padding (and priority fields).
    public static func unpadded(_ payload: ByteBuffer, flags: UInt8, priorityFields: Bool) throws(ConnectionError) -> ByteBuffer {
        var body = payload
        var padding = 0
        if flags & Flag.padded != 0 {
            guard let length = body.readInteger(as: UInt8.self) else {
                throw ConnectionError(.frameSizeError, "padded frame without a pad length")
            }
            padding = Int(length)
        }
        if priorityFields {
            guard body.readableBytes >= 5 else { throw ConnectionError(.frameSizeError, "HEADERS too short for its priority fields") }
            body.moveReaderIndex(forwardBy: 5)
        }
        guard padding <= body.readableBytes else { throw ConnectionError(.protocolError, "padding longer than the frame") }
        return body.readSlice(length: body.readableBytes - padding)!
    }

    /// The peer's settings as far as a sender needs them.
    public struct PeerSettings {
        public var initialWindow = HTTP2Wire.defaultWindow
        public var maxFrameSize = HTTP2Wire.defaultMaxFrameSize

        public init() {}

        /// What one SETTINGS frame changed.
        public struct Change {
            /// Added to every open stream's send window.
            public var windowDelta = 0
            /// SETTINGS_HEADER_TABLE_SIZE was sent: our next header block confirms our table size (0).
            public var headerTableSize = false
        }

        /// Applies a (non-ACK) SETTINGS payload.
        public mutating func apply(_ payload: ByteBuffer) throws(ConnectionError) -> Change {
            guard payload.readableBytes % 6 == 0 else { throw ConnectionError(.frameSizeError, "SETTINGS length not a multiple of 6") }
            var change = Change()
            var body = payload
            while let identifier = body.readInteger(as: UInt16.self), let value = body.readInteger(as: UInt32.self) {
                switch Setting(rawValue: identifier) {
                case .headerTableSize:
                    change.headerTableSize = true
                case .enablePush:
                    guard value <= 1 else { throw ConnectionError(.protocolError, "SETTINGS_ENABLE_PUSH \(value)") }
                case .initialWindowSize:
                    guard value <= UInt32(maximumWindow) else {
                        throw ConnectionError(.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE \(value)")
                    }
                    change.windowDelta += Int(value) - initialWindow
                    initialWindow = Int(value)
                case .maxFrameSize:
                    guard value >= 16_384, value <= 16_777_215 else {
                        throw ConnectionError(.protocolError, "SETTINGS_MAX_FRAME_SIZE \(value)")
                    }
                    maxFrameSize = Int(value)
                case .maxConcurrentStreams, .maxHeaderListSize, nil:
                    break  // we open no streams; our header lists are small; unknown settings are ignored
                }
            }
            return change
        }
    }

    // MARK: Writing

    /// Appends frames to one output buffer, which the connection writes once per burst.
    public struct FrameWriter {
        public private(set) var output: ByteBuffer
        private let allocator: ByteBufferAllocator
        private var scratch: ByteBuffer
        /// The next header block starts with a dynamic table size update to 0 (we never index).
        private var tableSizeUpdate = true

        public init(allocator: ByteBufferAllocator) {
            self.allocator = allocator
            self.output = allocator.buffer(capacity: 1024)
            self.scratch = allocator.buffer(capacity: 256)
        }

        public var isEmpty: Bool { output.readableBytes == 0 }

        /// The bytes so far (nil when none); the writer starts a new buffer.
        public mutating func take() -> ByteBuffer? {
            guard output.readableBytes > 0 else { return nil }
            defer { output = allocator.buffer(capacity: 1024) }
            return output
        }

        /// The peer changed SETTINGS_HEADER_TABLE_SIZE: confirm our table size in the next block (a decoder
        /// such as nghttp2's waits for that after a smaller setting).
        public mutating func confirmTableSize() {
            tableSizeUpdate = true
        }

        public mutating func frameHeader(length: Int, type: FrameType, flags: UInt8, stream: UInt32) {
            output.writeInteger(UInt8(truncatingIfNeeded: length >> 16))
            output.writeInteger(UInt16(truncatingIfNeeded: length))
            output.writeInteger(type.rawValue)
            output.writeInteger(flags)
            output.writeInteger(stream)
        }

        public mutating func frame(type: FrameType, flags: UInt8, stream: UInt32, payload: ByteBuffer) {
            frameHeader(length: payload.readableBytes, type: type, flags: flags, stream: stream)
            var bytes = payload
            output.writeBuffer(&bytes)
        }

        public mutating func settings(_ settings: [(Setting, Int)]) {
            frameHeader(length: 6 * settings.count, type: .settings, flags: 0, stream: 0)
            for (setting, value) in settings {
                output.writeInteger(setting.rawValue)
                output.writeInteger(UInt32(value))
            }
        }

        public mutating func settingsAck() {
            frameHeader(length: 0, type: .settings, flags: Flag.ack, stream: 0)
        }

        public mutating func windowUpdate(stream: UInt32, increment: Int) {
            frameHeader(length: 4, type: .windowUpdate, flags: 0, stream: stream)
            output.writeInteger(UInt32(increment))
        }

        public mutating func rstStream(_ stream: UInt32, _ code: ErrorCode) {
            frameHeader(length: 4, type: .rstStream, flags: 0, stream: stream)
            output.writeInteger(code.rawValue)
        }

        public mutating func ping(_ opaque: UInt64, ack: Bool) {
            frameHeader(length: 8, type: .ping, flags: ack ? Flag.ack : 0, stream: 0)
            output.writeInteger(opaque)
        }

        public mutating func goAway(lastStreamID: UInt32, code: ErrorCode, debugData: [UInt8]) {
            frameHeader(length: 8 + debugData.count, type: .goAway, flags: 0, stream: 0)
            output.writeInteger(lastStreamID)
            output.writeInteger(code.rawValue)
            output.writeBytes(debugData)
        }

        /// HEADERS (and CONTINUATION frames when the block is longer than `maxFrameSize`).
        public mutating func headers(
            stream: UInt32, _ headers: [(name: String, value: String)], endStream: Bool, maxFrameSize: Int
        ) {
            scratch.clear()
            if tableSizeUpdate {
                scratch.writeInteger(UInt8(0x20))
                tableSizeUpdate = false
            }
            HPACKLiteralEncoder.encode(headers, into: &scratch)
            var block = scratch
            var first = true
            repeat {
                let chunk = block.readSlice(length: min(block.readableBytes, maxFrameSize))!
                var flags: UInt8 = block.readableBytes == 0 ? Flag.endHeaders : 0
                if first, endStream { flags |= Flag.endStream }
                frame(type: first ? .headers : .continuation, flags: flags, stream: stream, payload: chunk)
                first = false
            } while block.readableBytes > 0
        }
    }
}

/// HPACK (RFC 7541) for answers, without the dynamic table: static-table matches are indexed, every other header
/// is a literal "without indexing", no Huffman coding. The decoder's state never changes, so there is nothing to
/// keep in step with the peer beyond the table size update ``HTTP2Wire/FrameWriter`` sends. Names must be
/// lowercase.
public enum HPACKLiteralEncoder {
    /// The static-table index of a name APNs answers use (RFC 7541 Appendix A), by length first so most names
    /// are dismissed without a comparison.
    @inline(__always)
    static func nameIndex(_ name: String) -> UInt8? {
        switch name.utf8.count {
        case 7: return name == ":status" ? 8 : nil
        case 12: return name == "content-type" ? 31 : nil
        case 14: return name == "content-length" ? 28 : nil
        default: return nil
        }
    }

    /// The static-table entry matching name (by its index) and value, sent as one byte.
    @inline(__always)
    static func fullMatch(nameIndex: UInt8, _ value: String) -> UInt8? {
        switch nameIndex {
        case 8:
            switch value {
            case "200": return 8
            case "204": return 9
            case "206": return 10
            case "304": return 11
            case "400": return 12
            case "404": return 13
            case "500": return 14
            default: return nil
            }
        default: return nil
        }
    }

    public static func encode(_ headers: [(name: String, value: String)], into buffer: inout ByteBuffer) {
        // At most 6 bytes per length or index prefix: reserve once, then write through a pointer.
        var capacity = 0
        for (name, value) in headers { capacity += name.utf8.count + value.utf8.count + 12 }
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: capacity) { raw in
            let out = raw.bindMemory(to: UInt8.self)
            var index = 0
            for (name, value) in headers {
                let nameIndex = Self.nameIndex(name)
                if let nameIndex, let entry = fullMatch(nameIndex: nameIndex, value) {
                    out[index] = 0x80 | entry
                    index += 1
                    continue
                }
                // Literal without indexing: 0000xxxx.
                if let nameIndex {
                    index = writeInteger(Int(nameIndex), prefixBits: 4, pattern: 0x00, into: out, at: index)
                } else {
                    out[index] = 0x00
                    index = writeString(name, into: out, at: index + 1)
                }
                index = writeString(value, into: out, at: index)
            }
            return index
        }
    }

    @inline(__always)
    static func writeString(_ text: String, into out: UnsafeMutableBufferPointer<UInt8>, at start: Int) -> Int {
        var text = text
        let count = text.utf8.count
        var index = writeInteger(count, prefixBits: 7, pattern: 0x00, into: out, at: start)  // H = 0: no Huffman
        text.withUTF8 { bytes in
            if let base = bytes.baseAddress { (out.baseAddress! + index).update(from: base, count: count) }
        }
        index += count
        return index
    }

    /// RFC 7541 §5.1 integer with an N-bit prefix.
    @inline(__always)
    static func writeInteger(_ value: Int, prefixBits: Int, pattern: UInt8, into out: UnsafeMutableBufferPointer<UInt8>, at start: Int) -> Int {
        let limit = (1 << prefixBits) - 1
        guard value >= limit else {
            out[start] = pattern | UInt8(value)
            return start + 1
        }
        out[start] = pattern | UInt8(limit)
        var index = start + 1
        var rest = value - limit
        while rest >= 128 {
            out[index] = UInt8(rest & 0x7f | 0x80)
            index += 1
            rest >>= 7
        }
        out[index] = UInt8(rest)
        return index + 1
    }
}
