import Foundation

/// A message read from Kafka.
public struct KafkaConsumerMessage: Sendable, Hashable {
    /// The topic it was read from.
    public var topic: String
    /// The partition it was read from.
    public var partition: Int32
    /// Its offset in the partition. Store `offset + 1` once processed (``KafkaConsumer/storeOffset(for:)``).
    public var offset: Int64
    /// The key, or `nil`.
    public var key: [UInt8]?
    /// The payload (empty for a null payload).
    public var value: [UInt8]
    /// Headers, in order.
    public var headers: [KafkaHeader]
    /// The record timestamp in milliseconds since the Unix epoch, if known.
    public var timestampMilliseconds: Int64?
    /// The consumer's assignment epoch when the message was fetched: after its partition is
    /// revoked (even if it is assigned again) the message is stale, and
    /// ``KafkaConsumer/isCurrent(_:)`` says so.
    public var fetchEpoch: Int

    /// Creates a message (for tests of code that consumes messages).
    public init(
        topic: String,
        partition: Int32,
        offset: Int64,
        key: [UInt8]?,
        value: [UInt8],
        headers: [KafkaHeader] = [],
        timestampMilliseconds: Int64? = nil,
        fetchEpoch: Int = 0
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestampMilliseconds = timestampMilliseconds
        self.fetchEpoch = fetchEpoch
    }

    /// The partition as a value.
    public var topicPartition: KafkaTopicPartition { KafkaTopicPartition(topic: topic, partition: partition) }

    /// The timestamp as a `Date`, if known.
    public var timestamp: Date? {
        timestampMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }

    /// The key decoded as UTF-8, if present and valid.
    public var keyString: String? { key.flatMap { String(validating: $0, as: UTF8.self) } }

    /// The value decoded as UTF-8, if valid.
    public var valueString: String? { String(validating: value, as: UTF8.self) }

    /// The first header named `key`, if any.
    public func header(_ key: String) -> KafkaHeader? { headers.first { $0.key == key } }
}

/// What the consumer tells the application about partition assignment changes.
///
/// - `onAssign`: new partitions. No message of them is delivered before it returned, however
///   long it takes (e.g. rebuild state). The poll thread waits for it up to
///   ``KafkaConsumerConfiguration/assignTimeout``; after that it holds the partitions paused in
///   librdkafka and goes on serving the group (heartbeats, further rebalances, the consumer's other
///   partitions) until the handler returns, then resumes them from the committed offset. If the
///   partitions are revoked meanwhile, the late return resumes nothing.
/// - `onRevoke`: partitions about to move; finish in-flight work for them and store its offsets.
///   The poll thread waits for it up to ``KafkaConsumerConfiguration/revokeTimeout``; then the
///   layer commits stored offsets and unassigns. Buffered messages of revoked partitions are
///   never delivered afterwards.
///
/// Handlers run one at a time, in the order of the rebalance events: a revoke handler starts
/// after the assign handler before it returned (its partitions delivered nothing meanwhile, so
/// they have no in-flight work), and its bound includes that wait.
///
/// The handlers must not wait for messages from the same consumer.
public struct KafkaRebalanceHandler: Sendable {
    /// Called with newly assigned partitions.
    public var onAssign: @Sendable ([KafkaTopicPartition]) async -> Void
    /// Called with partitions being revoked.
    public var onRevoke: @Sendable ([KafkaTopicPartition]) async -> Void

    /// Creates a handler; both default to doing nothing.
    public init(
        onAssign: @escaping @Sendable ([KafkaTopicPartition]) async -> Void = { _ in },
        onRevoke: @escaping @Sendable ([KafkaTopicPartition]) async -> Void = { _ in }
    ) {
        self.onAssign = onAssign
        self.onRevoke = onRevoke
    }
}
