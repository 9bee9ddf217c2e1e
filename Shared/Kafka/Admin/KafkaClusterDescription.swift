/// What a metadata request says about a cluster: its brokers and topics.
public struct KafkaClusterDescription: Sendable, Hashable {
    /// The brokers the cluster advertises, as `host:port`.
    public var brokers: [String]
    /// The topics, by name (internal topics included).
    public var topics: [String: KafkaTopicDescription]

    /// Creates a description (for tests of code that reads one).
    public init(brokers: [String], topics: [String: KafkaTopicDescription]) {
        self.brokers = brokers
        self.topics = topics
    }
}

/// One topic as the cluster's metadata describes it.
public struct KafkaTopicDescription: Sendable, Hashable {
    /// The topic name.
    public var name: String
    /// How many partitions it has.
    public var partitions: Int
    /// Replicas of its first partition (the replication factor it was created with).
    public var replicationFactor: Int
    /// Partitions whose leader is unknown (`-1`): they cannot be written now.
    public var partitionsWithoutLeader: Int

    /// Creates a description.
    public init(name: String, partitions: Int, replicationFactor: Int, partitionsWithoutLeader: Int = 0) {
        self.name = name
        self.partitions = partitions
        self.replicationFactor = replicationFactor
        self.partitionsWithoutLeader = partitionsWithoutLeader
    }
}

/// A topic to create with ``KafkaAdminClient/createTopics(_:timeout:)``.
public struct KafkaNewTopic: Sendable, Hashable {
    /// The topic name.
    public var name: String
    /// Number of partitions (≥ 1).
    public var partitions: Int
    /// Replication factor (≥ 1, at most the number of brokers).
    public var replicationFactor: Int
    /// Topic configs, e.g. `retention.ms`, `min.insync.replicas`.
    public var configs: [String: String]

    /// Creates a topic specification.
    public init(name: String, partitions: Int, replicationFactor: Int, configs: [String: String] = [:]) {
        self.name = name
        self.partitions = partitions
        self.replicationFactor = replicationFactor
        self.configs = configs
    }
}

/// The broker's answer for one topic of a CreateTopics request.
public struct KafkaTopicCreationResult: Sendable, Hashable {
    /// The topic name.
    public var name: String
    /// `nil` when the topic was created; otherwise why not (e.g. code `TOPIC_ALREADY_EXISTS`).
    public var error: KafkaError?

    /// Creates a result.
    public init(name: String, error: KafkaError?) {
        self.name = name
        self.error = error
    }
}
