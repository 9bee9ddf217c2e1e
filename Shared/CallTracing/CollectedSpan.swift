import Foundation
import Locking

/// A finished span as a local collector keeps it (``TraceStore``) and `callpush status --trace`
/// shows it: ids in lower-case hex, times in nanoseconds since 1970, attribute values as text.
public struct CollectedSpan: Codable, Sendable, Hashable {
    public struct Link: Codable, Sendable, Hashable {
        public var traceID: String
        public var spanID: String

        public init(traceID: String, spanID: String) {
            self.traceID = traceID
            self.spanID = spanID
        }
    }

    public var traceID: String
    public var spanID: String
    public var parentSpanID: String?
    public var name: String
    /// `server`, `client`, `producer`, `consumer` or `internal`.
    public var kind: String
    /// The resource's `service.name`.
    public var service: String
    public var startNanoseconds: UInt64
    public var endNanoseconds: UInt64
    public var attributes: [String: String]
    /// The status message when the span ended in error (`error` when it has none); nil otherwise.
    public var error: String?
    public var links: [Link]

    public init(traceID: String, spanID: String, parentSpanID: String?, name: String, kind: String, service: String,
                startNanoseconds: UInt64, endNanoseconds: UInt64, attributes: [String: String] = [:],
                error: String? = nil, links: [Link] = []) {
        self.traceID = traceID
        self.spanID = spanID
        self.parentSpanID = parentSpanID
        self.name = name
        self.kind = kind
        self.service = service
        self.startNanoseconds = startNanoseconds
        self.endNanoseconds = endNanoseconds
        self.attributes = attributes
        self.error = error
        self.links = links
    }
}

/// Decodes OTLP/HTTP JSON export requests (`ExportTraceServiceRequest`, the protobuf JSON
/// mapping: lowerCamelCase fields, 64-bit integers as strings, ids in hex — or base64, as
/// SwiftProtobuf's JSON encoder writes bytes).
public enum OTLPJSON {
    /// The spans of one export request.
    public static func spans(from body: Data) throws -> [CollectedSpan] {
        let request = try JSONDecoder().decode(ExportRequest.self, from: body)
        var spans: [CollectedSpan] = []
        for resourceSpans in request.resourceSpans ?? [] {
            let service = resourceSpans.resource?.attributes?.first { $0.key == "service.name" }?.value?.text ?? "unknown_service"
            for scopeSpans in resourceSpans.scopeSpans ?? [] {
                for span in scopeSpans.spans ?? [] {
                    guard let traceID = hexID(span.traceId, bytes: 16), let spanID = hexID(span.spanId, bytes: 8) else { continue }
                    var attributes: [String: String] = [:]
                    for attribute in span.attributes ?? [] { attributes[attribute.key] = attribute.value?.text ?? "" }
                    let failed = span.status?.code?.number == 2
                    spans.append(CollectedSpan(
                        traceID: traceID, spanID: spanID, parentSpanID: hexID(span.parentSpanId, bytes: 8),
                        name: span.name ?? "", kind: kindName(span.kind?.number), service: service,
                        startNanoseconds: span.startTimeUnixNano?.number ?? 0, endNanoseconds: span.endTimeUnixNano?.number ?? 0,
                        attributes: attributes,
                        error: failed ? (span.status?.message.flatMap { $0.isEmpty ? nil : $0 } ?? "error") : nil,
                        links: (span.links ?? []).compactMap { link in
                            guard let traceID = hexID(link.traceId, bytes: 16), let spanID = hexID(link.spanId, bytes: 8) else { return nil }
                            return CollectedSpan.Link(traceID: traceID, spanID: spanID)
                        }))
                }
            }
        }
        return spans
    }

    /// An id in lower-case hex from its JSON form (hex, or base64 of the bytes); nil when empty or invalid.
    static func hexID(_ text: String?, bytes: Int) -> String? {
        guard let text, !text.isEmpty else { return nil }
        if text.count == bytes * 2, text.allSatisfy(\.isHexDigit) { return text.lowercased() }
        guard let data = Data(base64Encoded: text), data.count == bytes, data.contains(where: { $0 != 0 }) else { return nil }
        return Hex.encode(data)
    }

    static func kindName(_ number: UInt64?) -> String {
        switch number {
        case 2: "server"
        case 3: "client"
        case 4: "producer"
        case 5: "consumer"
        default: "internal"
        }
    }

    // The parts of the OTLP JSON this decoder reads; everything else is ignored.
    struct ExportRequest: Decodable { var resourceSpans: [ResourceSpans]? }
    struct ResourceSpans: Decodable {
        var resource: Resource?
        var scopeSpans: [ScopeSpans]?
    }
    struct Resource: Decodable { var attributes: [KeyValue]? }
    struct ScopeSpans: Decodable { var spans: [Span]? }
    struct Span: Decodable {
        var traceId: String?
        var spanId: String?
        var parentSpanId: String?
        var name: String?
        var kind: Number?
        var startTimeUnixNano: Number?
        var endTimeUnixNano: Number?
        var attributes: [KeyValue]?
        var status: Status?
        var links: [Link]?
    }
    struct Status: Decodable {
        var code: Number?
        var message: String?
    }
    struct Link: Decodable {
        var traceId: String?
        var spanId: String?
    }
    struct KeyValue: Decodable {
        var key: String
        var value: AnyValue?
    }
    struct AnyValue: Decodable {
        var stringValue: String?
        var boolValue: Bool?
        var intValue: Number?
        var doubleValue: Double?
        var arrayValue: ArrayValue?

        var text: String? {
            if let stringValue { return stringValue }
            if let boolValue { return String(boolValue) }
            if let intValue { return intValue.text }
            if let doubleValue { return String(doubleValue) }
            if let values = arrayValue?.values { return "[" + values.compactMap(\.text).joined(separator: ", ") + "]" }
            return nil
        }
    }
    struct ArrayValue: Decodable { var values: [AnyValue]? }

    /// A protobuf JSON integer: a number or a string of digits (64-bit values are strings).
    struct Number: Decodable {
        var text: String
        var number: UInt64? { UInt64(text) ?? Int64(text).map { UInt64(bitPattern: $0) } }

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let string = try? container.decode(String.self) {
                text = string
            } else if let integer = try? container.decode(Int64.self) {
                text = String(integer)
            } else {
                text = String(try container.decode(UInt64.self))
            }
        }
    }
}
