/// A Kafka record header: a key and an optional binary value.
public struct KafkaHeader: Sendable, Hashable {
    /// The header name.
    public var key: String
    /// The header value; `nil` is a header without value (distinct from an empty value).
    public var value: [UInt8]?

    /// Creates a header with a binary value.
    public init(key: String, value: [UInt8]?) {
        self.key = key
        self.value = value
    }

    /// Creates a header with a UTF-8 string value.
    public init(key: String, string: String) {
        self.init(key: key, value: Array(string.utf8))
    }

    /// The value decoded as UTF-8, if it is valid UTF-8.
    public var stringValue: String? {
        value.flatMap { String(validating: $0, as: UTF8.self) }
    }
}
