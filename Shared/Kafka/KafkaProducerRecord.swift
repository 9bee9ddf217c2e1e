/// A record to produce.
public struct KafkaProducerRecord: Sendable, Hashable {
    /// The destination topic.
    public var topic: String
    /// An explicit partition, or `nil` to let the partitioner choose from the key.
    public var partition: Int32?
    /// The key (records with the same key go to the same partition), or `nil`.
    public var key: [UInt8]?
    /// The payload.
    public var value: [UInt8]
    /// Headers, in order.
    public var headers: [KafkaHeader]
    /// The record timestamp in milliseconds since the Unix epoch, or `nil` for "now".
    public var timestampMilliseconds: Int64?

    /// Creates a record with binary key and value.
    public init(
        topic: String,
        partition: Int32? = nil,
        key: [UInt8]? = nil,
        value: [UInt8],
        headers: [KafkaHeader] = [],
        timestampMilliseconds: Int64? = nil
    ) {
        self.topic = topic
        self.partition = partition
        self.key = key
        self.value = value
        self.headers = headers
        self.timestampMilliseconds = timestampMilliseconds
    }

    /// Creates a record with UTF-8 string key and value.
    public init(topic: String, partition: Int32? = nil, key: String?, value: String, headers: [KafkaHeader] = []) {
        self.init(topic: topic, partition: partition, key: key.map { Array($0.utf8) }, value: Array(value.utf8), headers: headers)
    }
}

/// The broker's acknowledgement of a produced record.
public struct KafkaDeliveryReport: Sendable, Hashable {
    /// The topic the record was stored in.
    public var topic: String
    /// The partition the record was stored in.
    public var partition: Int32
    /// The record's offset in the partition.
    public var offset: Int64
}
