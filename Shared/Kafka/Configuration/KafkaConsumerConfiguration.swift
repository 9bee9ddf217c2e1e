/// Configuration of a ``KafkaConsumer``.
///
/// Two modes:
/// - ``Mode-swift.enum/group(id:topics:)``: a consumer-group member subscribed to topics; partitions are
///   assigned by the group (eager `range` assignor by default).
/// - ``Mode-swift.enum/manual``: no group; the application assigns partitions at explicit offsets
///   with ``KafkaConsumer/assign(_:)`` (e.g. to rebuild state from a point in time).
///
/// Offsets are at-least-once: `enable.auto.offset.store=false` and `enable.auto.commit=true`;
/// the application stores `offset + 1` after processing with ``KafkaConsumer/storeOffset(for:)``.
public struct KafkaConsumerConfiguration: Sendable, Hashable, CustomStringConvertible {
    /// How partitions are obtained.
    public enum Mode: Sendable, Hashable {
        /// Consumer-group member with `group.id` = `id`, subscribed to `topics`.
        case group(id: String, topics: [String])
        /// No consumer group: partitions are assigned explicitly by the application.
        case manual
    }

    /// Brokers, client id and any librdkafka property (e.g. security settings).
    public var kafka: KafkaConfiguration
    /// Group membership or manual assignment.
    public var mode: Mode
    /// `group.instance.id` for static membership (e.g. the pod name). Default `nil`.
    public var groupInstanceID: String?
    /// `partition.assignment.strategy`. Default `range` (eager; cooperative-sticky is buggy in librdkafka 2.0.2).
    public var assignmentStrategy: String
    /// `auto.offset.reset` when the group has no committed offset. Default `earliest`.
    public var autoOffsetReset: String
    /// `session.timeout.ms`. Default 45 s.
    public var sessionTimeout: Duration
    /// `heartbeat.interval.ms`. Default 3 s.
    public var heartbeatInterval: Duration
    /// The most messages buffered between librdkafka and the application; above it the
    /// consumer pauses fetching (rebalances are still served). Default 10,000.
    public var maxBufferedMessages: Int
    /// The most bytes (keys, values, header values) buffered between librdkafka and the application;
    /// above it the consumer pauses fetching as for ``maxBufferedMessages``. Default 64 MiB, the bound
    /// of librdkafka's own prefetch (`queued.max.messages.kbytes`).
    public var maxBufferedBytes: Int
    /// How long the revoke handler may take before the layer commits and unassigns anyway. Default 10 s.
    public var revokeTimeout: Duration
    /// How long the poll thread waits for the assign handler before it goes back to serving the
    /// group; the handler's partitions stay paused until it returns. Default 30 s.
    public var assignTimeout: Duration
    /// How long shutdown waits for `rd_kafka_consumer_close` and `rd_kafka_destroy` each. Default 15 s.
    public var closeTimeout: Duration
    /// `auto.commit.interval.ms`: how often stored offsets are committed. Default 1 s (librdkafka's
    /// is 5 s). After a rebalance the next owner re-delivers from the last commit, so this bounds
    /// how much work a member that could not commit on revoke (its session lost, or a coordinator
    /// that refuses commits while the group joins) hands over again — and how far back the
    /// worker's dedupe has to remember. The cost is one OffsetCommit request per interval, only
    /// when offsets moved.
    public var commitInterval: Duration

    /// Creates a consumer configuration with callpush's defaults.
    public init(
        kafka: KafkaConfiguration,
        mode: Mode,
        groupInstanceID: String? = nil,
        assignmentStrategy: String = "range",
        autoOffsetReset: String = "earliest",
        sessionTimeout: Duration = .seconds(45),
        heartbeatInterval: Duration = .seconds(3),
        maxBufferedMessages: Int = 10_000,
        maxBufferedBytes: Int = 64 << 20,
        revokeTimeout: Duration = .seconds(10),
        assignTimeout: Duration = .seconds(30),
        closeTimeout: Duration = .seconds(15),
        commitInterval: Duration = .seconds(1)
    ) {
        self.kafka = kafka
        self.mode = mode
        self.groupInstanceID = groupInstanceID
        self.assignmentStrategy = assignmentStrategy
        self.autoOffsetReset = autoOffsetReset
        self.sessionTimeout = sessionTimeout
        self.heartbeatInterval = heartbeatInterval
        self.maxBufferedMessages = maxBufferedMessages
        self.maxBufferedBytes = maxBufferedBytes
        self.revokeTimeout = revokeTimeout
        self.assignTimeout = assignTimeout
        self.closeTimeout = closeTimeout
        self.commitInterval = commitInterval
    }

    /// The buffer's bounds (at least one message and one byte each).
    var bufferLimits: ConsumerStateMachine.BufferLimits {
        .init(messages: max(1, maxBufferedMessages), bytes: max(1, maxBufferedBytes))
    }

    /// The librdkafka properties: defaults, then the user's overrides.
    var librdkafkaProperties: [String: String] {
        var properties: [String: String] = [
            "enable.auto.offset.store": "false",
            "enable.auto.commit": "true",
            "auto.commit.interval.ms": String(commitInterval.milliseconds),
            "auto.offset.reset": autoOffsetReset,
            "partition.assignment.strategy": assignmentStrategy,
            "session.timeout.ms": String(sessionTimeout.milliseconds),
            "heartbeat.interval.ms": String(heartbeatInterval.milliseconds),
            // librdkafka's own prefetch (its default, 64 MB). At 16 MB the fetchers of 2.0.2 idled
            // between refills and the consumer reached 0.27× kcat instead of 0.66× (docs/benchmarks.md).
            "queued.max.messages.kbytes": "65536",
        ]
        switch mode {
        case .group(let id, _):
            properties["group.id"] = id
            if let groupInstanceID { properties["group.instance.id"] = groupInstanceID }
        case .manual:
            properties["enable.auto.commit"] = "false"
            properties["group.id"] = "callpush-manual"  // required by librdkafka; never joined
        }
        properties.merge(KafkaPropertyScope.forConsumer(kafka.rawProperties)) { _, user in user }
        return properties
    }

    public var description: String {
        "KafkaConsumerConfiguration(\(KafkaConfiguration.redactedDescription(of: librdkafkaProperties)))"
    }
}
