/// A partition of a topic.
public struct KafkaTopicPartition: Sendable, Hashable, CustomStringConvertible {
    /// The topic name.
    public var topic: String
    /// The partition number.
    public var partition: Int32

    /// Creates a topic partition.
    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public var description: String { "\(topic)[\(partition)]" }
}

/// A starting position for manual assignment.
public struct KafkaPartitionAssignment: Sendable, Hashable {
    /// Where to start reading.
    public enum Start: Sendable, Hashable {
        /// The first offset still stored.
        case beginning
        /// After the last message (only new messages).
        case end
        /// An explicit offset (the next message read has this offset).
        case offset(Int64)
    }

    /// The partition to read.
    public var topicPartition: KafkaTopicPartition
    /// Where to start.
    public var start: Start

    /// Creates an assignment of `partition` of `topic` starting at `start`.
    public init(topic: String, partition: Int32, start: Start) {
        self.topicPartition = KafkaTopicPartition(topic: topic, partition: partition)
        self.start = start
    }
}

/// The low (first stored) and high (next to be written) offsets of a partition.
public struct KafkaWatermarks: Sendable, Hashable {
    /// The first offset still stored.
    public var low: Int64
    /// The offset the next produced message will get; the partition's end.
    public var high: Int64
}
