import CRdKafka
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
        self.client = try RDKafkaClient.create(
            type: RD_KAFKA_PRODUCER,
            properties: ["client.id": "embedded-kafka-cluster"],
            logger: logger,
            delegate: nil,
            servesMainQueue: false
        )
        guard let mock = rd_kafka_mock_cluster_new(client.handle, Int32(brokers)),
            let bootstraps = rd_kafka_mock_cluster_bootstraps(mock)
        else {
            rd_kafka_destroy(client.handle)
            throw KafkaError(code: "mock_cluster", message: "rd_kafka_mock_cluster_new failed")
        }
        self.bootstrapServers = String(cString: bootstraps)
        self.cluster = Locked(UncheckedHandle(mock))
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
            rd_kafka_mock_cluster_destroy(mock.pointer)
        }
        await client.destroy(deadline: .seconds(10), name: "embedded-kafka-cluster")
        logger.info("embedded kafka cluster stopped")
    }

    /// Creates `topic` with `partitions` partitions and the given replication factor.
    public func createTopic(_ topic: String, partitions: Int, replicationFactor: Int = 1) throws(KafkaError) {
        try withCluster("create topic '\(topic)'") { mock in
            rd_kafka_mock_topic_create(mock, topic, Int32(partitions), Int32(replicationFactor))
        }
    }

    /// Takes broker `id` down: it closes its connections and refuses new ones (leaders do not move).
    public func setBrokerDown(_ id: Int32) throws(KafkaError) {
        try withCluster("set broker \(id) down") { rd_kafka_mock_broker_set_down($0, id) }
    }

    /// Brings broker `id` back up.
    public func setBrokerUp(_ id: Int32) throws(KafkaError) {
        try withCluster("set broker \(id) up") { rd_kafka_mock_broker_set_up($0, id) }
    }

    /// Delays every response of broker `id` by `rtt`.
    public func setBrokerRoundTripTime(_ id: Int32, _ rtt: Duration) throws(KafkaError) {
        try withCluster("set broker \(id) rtt") { rd_kafka_mock_broker_set_rtt($0, id, Int32(rtt.milliseconds)) }
    }

    /// Makes broker `id` the leader of `partition` of `topic` (`-1`: no leader).
    public func setPartitionLeader(topic: String, partition: Int32, broker id: Int32) throws(KafkaError) {
        try withCluster("set leader of \(topic)[\(partition)]") {
            rd_kafka_mock_partition_set_leader($0, topic, partition, id)
        }
    }

    /// Makes metadata requests for `topic` return `error` (`nil` clears it).
    public func setTopicError(_ topic: String, error: KafkaError.Code?) throws(KafkaError) {
        let err = try error.map { code throws(KafkaError) in try Self.responseError(named: code.rawValue) }
            ?? RD_KAFKA_RESP_ERR_NO_ERROR
        try withCluster("set topic error") { mock in
            rd_kafka_mock_topic_set_error(mock, topic, err)
            return RD_KAFKA_RESP_ERR_NO_ERROR
        }
    }

    /// Makes the next `errors.count` requests of API `apiKey` (e.g. ``KafkaAPIKey/produce``)
    /// fail with the given errors, in order. Errors are librdkafka error names such as
    /// `NOT_LEADER_FOR_PARTITION` (see ``KafkaError/Code``).
    public func pushRequestErrors(apiKey: KafkaAPIKey, errors: [KafkaError.Code]) throws(KafkaError) {
        var codes: [rd_kafka_resp_err_t] = []
        for error in errors { codes.append(try Self.responseError(named: error.rawValue)) }
        try withCluster("push request errors") { mock in
            codes.withUnsafeBufferPointer { buffer in
                rd_kafka_mock_push_request_errors_array(mock, apiKey.rawValue, buffer.count, buffer.baseAddress)
            }
            return RD_KAFKA_RESP_ERR_NO_ERROR
        }
    }

    private func withCluster(_ what: String, _ body: (OpaquePointer) -> rd_kafka_resp_err_t) throws(KafkaError) {
        let err = cluster.withLock { handle -> rd_kafka_resp_err_t? in
            guard let handle else { return nil }
            return body(handle.pointer)
        }
        guard let err else { throw KafkaError.shutdown("embedded cluster") }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(rdKafka: err, context: what) }
    }

    /// Looks up a librdkafka error by its name (as in `rd_kafka_err2name`).
    static func responseError(named name: String) throws(KafkaError) -> rd_kafka_resp_err_t {
        var descriptionsPointer: UnsafePointer<rd_kafka_err_desc>?
        var count = 0
        rd_kafka_get_err_descs(&descriptionsPointer, &count)
        guard let descriptions = descriptionsPointer else {
            throw KafkaError(code: .invalidUsage, message: "no librdkafka error table")
        }
        for index in 0..<count {
            let description = descriptions[index]
            if let entryName = description.name, String(cString: entryName) == name {
                return description.code
            }
        }
        throw KafkaError(code: .invalidUsage, message: "unknown librdkafka error name '\(name)'")
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
