import Locking

/// Decodes OTLP/HTTP binary protobuf export requests (`ExportTraceServiceRequest`,
/// `Content-Type: application/x-protobuf`, the OTLP default), reading only the fields
/// ``CollectedSpan`` keeps and skipping the rest as protobuf's wire format allows.
///
/// Hand-written on purpose: the generated OTLP types live inside swift-otel, and decoding the
/// JSON encoding instead (``OTLPJSON``, through Foundation's `JSONDecoder`) was the largest item in
/// a profile of `callpush dev` at 1,000 calls/s. The reader checks every length against the body
/// and bounds nesting, so a malformed body is an error, never a crash.
public enum OTLPProtobuf {
    /// The body is not a well-formed export request.
    public struct Malformed: Error, CustomStringConvertible {
        public var description: String
    }

    /// The spans of one export request.
    public static func spans(from body: [UInt8]) throws(Malformed) -> [CollectedSpan] {
        var spans: [CollectedSpan] = []
        var request = WireReader(body)
        while let field = try request.next() {
            guard field.number == 1 else { try request.skip(field); continue }  // resource_spans
            var resourceSpans = try request.message(field)
            var service = "unknown_service"
            var scopes: [WireReader] = []
            while let field = try resourceSpans.next() {
                switch field.number {
                case 1:  // resource
                    var resource = try resourceSpans.message(field)
                    while let field = try resource.next() {
                        guard field.number == 1 else { try resource.skip(field); continue }  // attributes
                        let (key, value) = try keyValue(resource.message(field))
                        if key == "service.name", let value { service = value }
                    }
                case 2: scopes.append(try resourceSpans.message(field))  // scope_spans
                default: try resourceSpans.skip(field)
                }
            }
            for var scope in scopes {
                while let field = try scope.next() {
                    guard field.number == 2 else { try scope.skip(field); continue }  // spans
                    if let span = try span(scope.message(field), service: service) { spans.append(span) }
                }
            }
        }
        return spans
    }

    /// A `Span`; nil when its trace or span id is missing or invalid (as ``OTLPJSON`` does).
    static func span(_ reader: WireReader, service: String) throws(Malformed) -> CollectedSpan? {
        var reader = reader
        var traceID: String?, spanID: String?, parentSpanID: String?
        var name = "", kind: UInt64?, start: UInt64 = 0, end: UInt64 = 0
        var attributes: [String: String] = [:]
        var links: [CollectedSpan.Link] = []
        var statusCode: UInt64 = 0, statusMessage = ""
        while let field = try reader.next() {
            switch field.number {
            case 1: traceID = hexID(try reader.bytes(field), count: 16)
            case 2: spanID = hexID(try reader.bytes(field), count: 8)
            case 4: parentSpanID = hexID(try reader.bytes(field), count: 8)
            case 5: name = String(decoding: try reader.bytes(field), as: UTF8.self)
            case 6: kind = try reader.varint(field)
            case 7: start = try reader.fixed64(field)
            case 8: end = try reader.fixed64(field)
            case 9:
                let (key, value) = try keyValue(reader.message(field))
                attributes[key] = value ?? ""
            case 13:
                var link = try reader.message(field)
                var linkTrace: String?, linkSpan: String?
                while let field = try link.next() {
                    switch field.number {
                    case 1: linkTrace = hexID(try link.bytes(field), count: 16)
                    case 2: linkSpan = hexID(try link.bytes(field), count: 8)
                    default: try link.skip(field)
                    }
                }
                if let linkTrace, let linkSpan { links.append(.init(traceID: linkTrace, spanID: linkSpan)) }
            case 15:
                var status = try reader.message(field)
                while let field = try status.next() {
                    switch field.number {
                    case 2: statusMessage = String(decoding: try status.bytes(field), as: UTF8.self)
                    case 3: statusCode = try status.varint(field)
                    default: try status.skip(field)
                    }
                }
            default: try reader.skip(field)
            }
        }
        guard let traceID, let spanID else { return nil }
        return CollectedSpan(traceID: traceID, spanID: spanID, parentSpanID: parentSpanID, name: name,
                             kind: OTLPJSON.kindName(kind), service: service, startNanoseconds: start, endNanoseconds: end,
                             attributes: attributes, error: statusCode == 2 ? (statusMessage.isEmpty ? "error" : statusMessage) : nil,
                             links: links)
    }

    /// A `KeyValue`: its key and its value as text (nil for kinds without one, as in ``OTLPJSON``).
    static func keyValue(_ reader: WireReader) throws(Malformed) -> (String, String?) {
        var reader = reader
        var key = "", value: String?
        while let field = try reader.next() {
            switch field.number {
            case 1: key = String(decoding: try reader.bytes(field), as: UTF8.self)
            case 2: value = try text(of: reader.message(field), depth: 0)
            default: try reader.skip(field)
            }
        }
        return (key, value)
    }

    /// An `AnyValue` as text: strings as they are, booleans and numbers in Swift's spelling, arrays
    /// as `[a, b]`; nil for key-value lists and bytes. Arrays nest at most 8 deep.
    static func text(of reader: WireReader, depth: Int) throws(Malformed) -> String? {
        guard depth < 8 else { throw Malformed(description: "attribute arrays nested deeper than 8") }
        var reader = reader
        var text: String?
        while let field = try reader.next() {
            switch field.number {
            case 1: text = String(decoding: try reader.bytes(field), as: UTF8.self)
            case 2: text = String(try reader.varint(field) != 0)
            case 3: text = String(Int64(bitPattern: try reader.varint(field)))
            case 4: text = String(Double(bitPattern: try reader.fixed64(field)))
            case 5:
                var array = try reader.message(field)
                var values: [String] = []
                while let field = try array.next() {
                    guard field.number == 1 else { try array.skip(field); continue }
                    if let value = try self.text(of: array.message(field), depth: depth + 1) { values.append(value) }
                }
                text = "[" + values.joined(separator: ", ") + "]"
            default:
                text = nil
                try reader.skip(field)
            }
        }
        return text
    }

    /// Lower-case hex of an id of `count` bytes; nil when empty, of another length, or all zero.
    static func hexID(_ bytes: ArraySlice<UInt8>, count: Int) -> String? {
        guard bytes.count == count, bytes.contains(where: { $0 != 0 }) else { return nil }
        return Hex.encode(bytes)
    }
}

/// Protobuf's wire format over one message's bytes: fields in order, each a number and a wire
/// type; nested messages are readers over their part of the same bytes.
struct WireReader {
    struct Field {
        var number: UInt64
        var wireType: UInt8
    }

    private let bytes: [UInt8]
    private var index: Int
    private let end: Int

    init(_ bytes: [UInt8]) {
        self.init(bytes, range: bytes.startIndex..<bytes.endIndex)
    }

    private init(_ bytes: [UInt8], range: Range<Int>) {
        self.bytes = bytes
        self.index = range.lowerBound
        self.end = range.upperBound
    }

    /// The next field's key; nil at the end of the message.
    mutating func next() throws(OTLPProtobuf.Malformed) -> Field? {
        guard index < end else { return nil }
        let key = try readVarint()
        let field = Field(number: key >> 3, wireType: UInt8(key & 7))
        guard field.number > 0 else { throw malformed("field number 0") }
        return field
    }

    mutating func varint(_ field: Field) throws(OTLPProtobuf.Malformed) -> UInt64 {
        try expect(field, 0)
        return try readVarint()
    }

    mutating func fixed64(_ field: Field) throws(OTLPProtobuf.Malformed) -> UInt64 {
        try expect(field, 1)
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 8) { value |= UInt64(try readByte()) << UInt64(shift) }
        return value
    }

    /// A length-delimited field's bytes (strings, bytes).
    mutating func bytes(_ field: Field) throws(OTLPProtobuf.Malformed) -> ArraySlice<UInt8> {
        bytes[try delimited(field)]
    }

    /// A length-delimited field as a nested message.
    mutating func message(_ field: Field) throws(OTLPProtobuf.Malformed) -> WireReader {
        WireReader(bytes, range: try delimited(field))
    }

    /// Skips a field this decoder does not read.
    mutating func skip(_ field: Field) throws(OTLPProtobuf.Malformed) {
        switch field.wireType {
        case 0: _ = try readVarint()
        case 1: try advance(8)
        case 2: _ = try delimited(field)
        case 5: try advance(4)
        default: throw malformed("wire type \(field.wireType) of field \(field.number)")
        }
    }

    private mutating func delimited(_ field: Field) throws(OTLPProtobuf.Malformed) -> Range<Int> {
        try expect(field, 2)
        let length = try readVarint()
        guard length <= UInt64(end - index) else { throw malformed("field \(field.number) runs past the end of its message") }
        let range = index..<(index + Int(length))
        index = range.upperBound
        return range
    }

    private mutating func advance(_ count: Int) throws(OTLPProtobuf.Malformed) {
        guard end - index >= count else { throw malformed("a fixed-width field runs past the end of its message") }
        index += count
    }

    private mutating func readByte() throws(OTLPProtobuf.Malformed) -> UInt8 {
        guard index < end else { throw malformed("a field runs past the end of its message") }
        defer { index += 1 }
        return bytes[index]
    }

    private mutating func readVarint() throws(OTLPProtobuf.Malformed) -> UInt64 {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 70, by: 7) {
            let byte = try readByte()
            value |= UInt64(byte & 0x7f) << UInt64(shift)
            if byte < 0x80 { return value }
        }
        throw malformed("a varint longer than 10 bytes")
    }

    private func expect(_ field: Field, _ wireType: UInt8) throws(OTLPProtobuf.Malformed) {
        guard field.wireType == wireType else {
            throw malformed("field \(field.number) has wire type \(field.wireType), expected \(wireType)")
        }
    }

    private func malformed(_ text: String) -> OTLPProtobuf.Malformed {
        OTLPProtobuf.Malformed(description: "not an OTLP protobuf export request: " + text)
    }
}
