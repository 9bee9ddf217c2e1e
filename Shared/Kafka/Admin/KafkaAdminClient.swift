import Logging
import Synchronization

/// A small Kafka admin client: describes the cluster (brokers, topics, partition counts)
/// with a bounded metadata request, and creates topics (CreateTopics) with partitions,
/// replication factor and configs.
///
/// A metadata request that times out is how callers detect an unreachable cluster: the
/// error's code is `_TRANSPORT`, `_TIMED_OUT` or `_ALL_BROKERS_DOWN` (``isUnreachable(_:)``).
///
/// librdkafka's mock cluster (``EmbeddedKafkaCluster``) answers metadata but does not
/// implement CreateTopics; there ``createTopics(_:timeout:)`` fails.
public final class KafkaAdminClient: Sendable {
    let client: RDKafkaClient
    let handleGuard = HandleGuard()
    private let destroyed = Atomic<Bool>(false)
    private let logger: Logger

    /// Creates the client (no request is made yet).
    ///
    /// - Throws: ``KafkaError`` with code ``KafkaError/Code/configuration`` naming a rejected property.
    public init(configuration: KafkaConfiguration, logger: Logger) throws(KafkaError) {
        self.logger = logger
        var properties = KafkaPropertyScope.forProducer(configuration.rawProperties)
        // Fail fast on an unreachable cluster instead of reconnecting for long.
        properties["reconnect.backoff.max.ms"] = properties["reconnect.backoff.max.ms"] ?? "1000"
        self.client = try RDKafkaClient.admin(properties: properties, logger: logger)
    }

    /// Asks the cluster for its brokers and topics, waiting at most `timeout`.
    public func describeCluster(timeout: Duration = .seconds(10)) async throws(KafkaError) -> KafkaClusterDescription {
        try await handleGuard.blockingCall("kafka-admin.metadata", on: client, owner: "admin client", timeout: timeout) {
            RDKafkaAdmin.metadata($0, timeoutMs: $1)
        }
    }

    /// Creates `topics`; returns the broker's answer per topic (an existing topic answers
    /// `TOPIC_ALREADY_EXISTS`). The request and the wait are bounded by `timeout`.
    ///
    /// - Throws: ``KafkaError`` when the request as a whole failed (unreachable, unsupported, timeout).
    public func createTopics(_ topics: [KafkaNewTopic], timeout: Duration = .seconds(30)) async throws(KafkaError) -> [KafkaTopicCreationResult] {
        guard !topics.isEmpty else { return [] }
        return try await handleGuard.blockingCall("kafka-admin.create-topics", on: client, owner: "admin client", timeout: timeout) {
            RDKafkaAdmin.createTopics($0, topics, timeoutMs: $1)
        }
    }

    /// Destroys the client (bounded). Safe to call more than once.
    public func shutdown() async {
        guard !destroyed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        await handleGuard.closeAndWait()
        await client.destroy(deadline: .seconds(5), name: "kafka-admin")
    }

    /// Whether `error` means no broker could be reached in time.
    public static func isUnreachable(_ error: KafkaError) -> Bool {
        error.rdKafkaCode.map(KafkaError.unreachableCodes.contains) ?? (error.code == .timeout)
    }
}
