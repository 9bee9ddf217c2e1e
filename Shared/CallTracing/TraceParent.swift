import Kafka

/// A W3C trace context as it travels in headers (Kafka records, HTTP requests): a well-formed
/// `traceparent` and, when valid, its `tracestate`.
///
/// Values from outside (a caller's HTTP headers, any producer's Kafka records) are checked here
/// before a tracer sees them: a malformed `traceparent` is ignored (the span starts a new trace),
/// and a `tracestate` that is too long or not printable ASCII is dropped, so outside input can
/// neither grow what is propagated nor make the tracer log a warning per request.
public struct TraceParent: Sendable, Hashable {
    /// `traceparent` (W3C Trace Context): `version-traceid-parentid-flags`.
    public static let traceparentHeader = "traceparent"
    /// `tracestate` (W3C Trace Context): vendor entries.
    public static let tracestateHeader = "tracestate"
    /// The longest `tracestate` kept (the W3C recommendation for what to propagate at least).
    public static let maxTracestateBytes = 512

    /// The `traceparent` value.
    public let traceparent: String
    /// The `tracestate` value, when there is a valid one.
    public let tracestate: String?

    /// A context from header values; nil when `traceparent` is missing or malformed.
    public init?(traceparent: String?, tracestate: String? = nil) {
        guard let traceparent, Self.isValid(traceparent: traceparent.utf8) else { return nil }
        self.traceparent = traceparent
        self.tracestate = tracestate.flatMap { Self.isValid(tracestate: $0.utf8) ? $0 : nil }
    }

    /// The context a Kafka record carries in its `traceparent` / `tracestate` headers, if any.
    public init?(kafkaHeaders headers: [KafkaHeader]) {
        var traceparent: [UInt8]?
        var tracestate: [UInt8]?
        for header in headers {
            if header.key == Self.traceparentHeader, traceparent == nil {
                traceparent = header.value
            } else if header.key == Self.tracestateHeader, tracestate == nil {
                tracestate = header.value
            }
        }
        guard let traceparent, Self.isValid(traceparent: traceparent) else { return nil }
        self.traceparent = String(decoding: traceparent, as: UTF8.self)
        self.tracestate = tracestate.flatMap { Self.isValid(tracestate: $0) ? String(decoding: $0, as: UTF8.self) : nil }
    }

    /// The 32 lower-case hex digits of the trace id.
    public var traceID: String { String(traceparent.dropFirst(3).prefix(32)) }

    /// The 16 lower-case hex digits of the parent span id.
    public var spanID: String { String(traceparent.dropFirst(36).prefix(16)) }

    /// The headers carrying this context on a Kafka record.
    public var kafkaHeaders: [KafkaHeader] {
        var headers = [KafkaHeader(key: Self.traceparentHeader, string: traceparent)]
        if let tracestate { headers.append(KafkaHeader(key: Self.tracestateHeader, string: tracestate)) }
        return headers
    }

    /// The headers carrying this context as name–value pairs (HTTP, the worker's outcome records).
    public var headerPairs: [(String, String)] {
        var headers = [(Self.traceparentHeader, traceparent)]
        if let tracestate { headers.append((Self.tracestateHeader, tracestate)) }
        return headers
    }

    /// Whether `value` is a `traceparent` this implementation can continue: version `00` with
    /// exactly 55 characters, or a later version (not `ff`) whose first 55 characters have the
    /// `00` layout; lower-case hex; neither the trace id nor the parent id all zeros.
    static func isValid<Bytes: Collection<UInt8>>(traceparent value: Bytes) -> Bool {
        let bytes = Array(value.prefix(56))
        guard bytes.count >= 55 else { return false }
        func isHex(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte) }
        func allHex(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy(isHex) }
        func allZero(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { $0 == 0x30 } }
        guard allHex(0..<2), !(bytes[0] == 0x66 && bytes[1] == 0x66),
              bytes[2] == 0x2D, allHex(3..<35), bytes[35] == 0x2D, allHex(36..<52), bytes[52] == 0x2D, allHex(53..<55),
              !allZero(3..<35), !allZero(36..<52) else { return false }
        let isVersionZero = bytes[0] == 0x30 && bytes[1] == 0x30
        if isVersionZero { return value.count == 55 }
        return value.count == 55 || bytes[55] == 0x2D
    }

    /// Whether `value` is a `tracestate` worth propagating: at most ``maxTracestateBytes`` of
    /// printable ASCII (list members are not parsed further: the tracer only passes it on).
    static func isValid<Bytes: Collection<UInt8>>(tracestate value: Bytes) -> Bool {
        !value.isEmpty && value.count <= maxTracestateBytes && value.allSatisfy { (0x20...0x7E).contains($0) }
    }
}
