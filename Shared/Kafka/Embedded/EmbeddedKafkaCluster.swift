import Logging
import ServiceLifecycle
import Locking

/// An in-process Kafka cluster for development and tests: librdkafka's mock cluster.
///
/// It listens on TCP loopback ports, so clients in this and other processes can connect
/// to ``bootstrapServers``. It lives until ``shutdown()`` (or, run as a `Service`, until
/// graceful shutdown). Faults can be injected: brokers down/up, round-trip delays,
/// request errors, leader changes and topic errors.
///
/// Limits (it is a test double, not a broker): no TLS/SASL, no CreateTopics API (create
/// topics with ``createTopic(_:partitions:replicationFactor:)``; auto-created topics get 4
/// partitions), and it keeps only the newest few MB per partition (about 13–15k messages of
/// 330 bytes).
public final class EmbeddedKafkaCluster: Service, Sendable {
    /// The `bootstrap.servers` string of the cluster, e.g. `127.0.0.1:40123,127.0.0.1:40125`.
    public let bootstrapServers: String
    /// The number of brokers (ids 1...brokerCount).
    public let brokerCount: Int
    private let logger: Logger
    /// The dummy producer handle the mock cluster needs; it must outlive the cluster.
    private let client: RDKafkaClient
    /// `nil` once destroyed; every fault-injection call checks it under the lock.
    private let cluster: Locked<UncheckedHandle?>

    /// Starts a cluster of `brokers` brokers.
    ///
    /// - Throws: ``KafkaError`` if librdkafka cannot create it.
    public init(brokers: Int = 3, logger: Logger) throws(KafkaError) {
        guard brokers >= 1 else {
            throw KafkaError(code: .invalidUsage, message: "a cluster needs at least one broker")
        }
        self.brokerCount = brokers
        self.logger = logger
        self.client = try RDKafkaMock.host(logger: logger)
        let (mock, bootstraps) = try RDKafkaMock.start(on: client, brokers: brokers)
        self.bootstrapServers = bootstraps
        self.cluster = Locked(mock)
        logger.info("embedded kafka cluster started", metadata: ["kafka.bootstrap": "\(bootstrapServers)"])
    }

    /// Runs until graceful shutdown (or cancellation), then stops the cluster.
    public func run() async throws {
        await withTaskCancellationHandler {
            try? await gracefulShutdown()
        } onCancel: {}
        await shutdown()
    }

    /// Stops the cluster (connected clients see their brokers go away). Safe to call twice.
    public func shutdown() async {
        guard let mock = cluster.withLock({ handle -> UncheckedHandle? in
            defer { handle = nil }
            return handle
        }) else { return }
        await BlockingCall.run("kafka-mock.destroy") {
            RDKafkaMock.destroy(mock.pointer)
        }
        await client.destroy(deadline: .seconds(10), name: "embedded-kafka-cluster")
        logger.info("embedded kafka cluster stopped")
    }

    /// Creates `topic` with `partitions` partitions and the given replication factor.
    public func createTopic(_ topic: String, partitions: Int, replicationFactor: Int = 1) throws(KafkaError) {
        try withCluster("create topic '\(topic)'") { mock in
            RDKafkaMock.createTopic(mock, topic, partitions: partitions, replicationFactor: replicationFactor)
        }
    }

    /// Takes broker `id` down: it closes its connections and refuses new ones (leaders do not move).
    public func setBrokerDown(_ id: Int32) throws(KafkaError) {
        try withCluster("set broker \(id) down") { RDKafkaMock.setBrokerDown($0, id) }
    }

    /// Brings broker `id` back up.
    public func setBrokerUp(_ id: Int32) throws(KafkaError) {
        try withCluster("set broker \(id) up") { RDKafkaMock.setBrokerUp($0, id) }
    }

    /// Delays every response of broker `id` by `rtt`.
    public func setBrokerRoundTripTime(_ id: Int32, _ rtt: Duration) throws(KafkaError) {
        try withCluster("set broker \(id) rtt") { RDKafkaMock.setBrokerRoundTripTime($0, id, milliseconds: Int32(rtt.milliseconds)) }
    }

    /// Makes broker `id` the leader of `partition` of `topic` (`-1`: no leader).
    public func setPartitionLeader(topic: String, partition: Int32, broker id: Int32) throws(KafkaError) {
        try withCluster("set leader of \(topic)[\(partition)]") {
            RDKafkaMock.setPartitionLeader($0, topic: topic, partition: partition, broker: id)
        }
    }

    /// Makes metadata requests for `topic` return `error` (`nil` clears it).
    public func setTopicError(_ topic: String, error: KafkaError.Code?) throws(KafkaError) {
        let errorCode = try error.map { code throws(KafkaError) in try RDKafkaMock.responseError(named: code.rawValue) } ?? RDKafkaMock.ok
        try withCluster("set topic error") { RDKafkaMock.setTopicError($0, topic: topic, code: errorCode) }
    }

    /// Makes the next `errors.count` requests of API `apiKey` (e.g. ``KafkaAPIKey/produce``)
    /// fail with the given errors, in order. Errors are librdkafka error names such as
    /// `NOT_LEADER_FOR_PARTITION` (see ``KafkaError/Code``).
    public func pushRequestErrors(apiKey: KafkaAPIKey, errors: [KafkaError.Code]) throws(KafkaError) {
        var codes: [Int32] = []
        for error in errors { codes.append(try RDKafkaMock.responseError(named: error.rawValue)) }
        try withCluster("push request errors") { RDKafkaMock.pushRequestErrors($0, apiKey: apiKey.rawValue, codes: codes) }
    }

    private func withCluster(_ what: String, _ body: (OpaquePointer) -> Int32) throws(KafkaError) {
        let code = cluster.withLock { handle -> Int32? in
            guard let handle else { return nil }
            return body(handle.pointer)
        }
        guard let code else { throw KafkaError.shutdown("embedded cluster") }
        guard code == RDKafkaMock.ok else { throw KafkaError(rdKafkaCode: code, context: what) }
    }
}

/// Kafka protocol request types, for fault injection.
public struct KafkaAPIKey: Sendable, Hashable {
    /// The protocol's ApiKey number.
    public let rawValue: Int16

    /// Creates an API key from its protocol number.
    public init(rawValue: Int16) { self.rawValue = rawValue }

    /// ProduceRequest (0).
    public static let produce = KafkaAPIKey(rawValue: 0)
    /// FetchRequest (1).
    public static let fetch = KafkaAPIKey(rawValue: 1)
    /// ListOffsetsRequest (2).
    public static let listOffsets = KafkaAPIKey(rawValue: 2)
    /// MetadataRequest (3).
    public static let metadata = KafkaAPIKey(rawValue: 3)
    /// OffsetCommitRequest (8).
    public static let offsetCommit = KafkaAPIKey(rawValue: 8)
    /// OffsetFetchRequest (9).
    public static let offsetFetch = KafkaAPIKey(rawValue: 9)
    /// FindCoordinatorRequest (10).
    public static let findCoordinator = KafkaAPIKey(rawValue: 10)
    /// JoinGroupRequest (11).
    public static let joinGroup = KafkaAPIKey(rawValue: 11)
    /// HeartbeatRequest (12).
    public static let heartbeat = KafkaAPIKey(rawValue: 12)
    /// InitProducerIdRequest (22).
    public static let initProducerID = KafkaAPIKey(rawValue: 22)
}
