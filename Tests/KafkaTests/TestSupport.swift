import CallpushTestSupport
import Foundation
import Locking
import Logging
import Testing

@testable import Kafka

/// Shared helpers: fast client settings, unique names, bounded waits, cleanup.
enum TestSupport {
    /// Each suite's time limit: 2 minutes, stretched under sanitizers like every bound (TestTiming).
    static let suiteTimeLimit: TimeLimitTrait.Duration = .minutes(2 * Int(TestTiming.scale.rounded(.up)))

    static let logger: Logger = .quietTestLogger(label: "kafka-tests", levelFrom: "KAFKA_TEST_LOG")

    static func unique(_ prefix: String) -> String {
        "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())"
    }

    static func producerConfiguration(_ cluster: EmbeddedKafkaCluster) -> KafkaProducerConfiguration {
        var configuration = KafkaProducerConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: [cluster.bootstrapServers], clientID: "test-producer")
        )
        configuration.flushTimeout = .seconds(5)
        configuration.destroyTimeout = .seconds(5)
        configuration.kafka.properties["topic.metadata.refresh.interval.ms"] = "1000"
        return configuration
    }

    /// Group settings that make rebalances take about a second instead of ten.
    static func consumerConfiguration(
        _ cluster: EmbeddedKafkaCluster,
        group: String,
        topics: [String]
    ) -> KafkaConsumerConfiguration {
        var properties = [
            "topic.metadata.refresh.interval.ms": "1000",
            "fetch.wait.max.ms": "50",
            "auto.commit.interval.ms": "200",
            "reconnect.backoff.ms": "50",
            "reconnect.backoff.max.ms": "500",
        ]
        // librdkafka debug contexts for diagnosing a test (e.g. KAFKA_TEST_RDDEBUG=consumer,topic,fetch).
        if let debug = ProcessInfo.processInfo.environment["KAFKA_TEST_RDDEBUG"] { properties["debug"] = debug }
        return KafkaConsumerConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: [cluster.bootstrapServers], clientID: "test-consumer", properties: properties),
            mode: .group(id: group, topics: topics),
            sessionTimeout: .seconds(6),
            heartbeatInterval: .milliseconds(300),
            revokeTimeout: .seconds(10),
            closeTimeout: .seconds(10)
        )
    }

    static func manualConsumerConfiguration(_ cluster: EmbeddedKafkaCluster) -> KafkaConsumerConfiguration {
        var configuration = consumerConfiguration(cluster, group: "unused", topics: [])
        configuration.mode = .manual
        return configuration
    }
}

/// Starts an embedded cluster, runs `body`, and always shuts the cluster down.
func withCluster<T: Sendable>(
    brokers: Int = 3,
    _ body: (EmbeddedKafkaCluster) async throws -> T
) async throws -> T {
    let cluster = try EmbeddedKafkaCluster(brokers: brokers, logger: TestSupport.logger)
    return try await withShutdown(cluster, shutdown: { await $0.shutdown() }, body)
}

/// Starts an embedded cluster with a fresh topic (named `prefix` and a unique suffix), runs
/// `body`, and always shuts the cluster down.
func withTopic<T: Sendable>(
    _ prefix: String,
    partitions: Int,
    brokers: Int = 3,
    _ body: (EmbeddedKafkaCluster, String) async throws -> T
) async throws -> T {
    try await withCluster(brokers: brokers) { cluster in
        try await body(cluster, try await makeTopic(prefix, partitions: partitions, on: cluster))
    }
}

/// Creates a producer, runs `body`, and always shuts the producer down.
/// `deadlines`: the sweeper its bounded sends use (a test's own, to count only this producer's).
func withProducer<T: Sendable>(
    _ configuration: KafkaProducerConfiguration,
    deadlines: DeadlineSweeper = .shared,
    _ body: (KafkaProducer) async throws -> T
) async throws -> T {
    let producer = try KafkaProducer(configuration: configuration, logger: TestSupport.logger, deadlines: deadlines)
    return try await withShutdown(producer, shutdown: { await $0.shutdown() }, body)
}

/// Creates a consumer, runs `body`, and always shuts the consumer down.
func withConsumer<T: Sendable>(
    _ configuration: KafkaConsumerConfiguration,
    rebalanceHandler: KafkaRebalanceHandler = KafkaRebalanceHandler(),
    _ body: (KafkaConsumer) async throws -> T
) async throws -> T {
    let consumer = try KafkaConsumer(configuration: configuration, rebalanceHandler: rebalanceHandler, logger: TestSupport.logger)
    return try await withShutdown(consumer, shutdown: { await $0.shutdown() }, body)
}

/// Reads `topic`'s partitions `0..<partitions` from the beginning (manual assignment) until
/// `done` says so (or the timeout fails the test).
func readFromBeginning(
    _ topic: String,
    partitions: Int32,
    on cluster: EmbeddedKafkaCluster,
    seconds: Double,
    until done: @escaping @Sendable ([KafkaConsumerMessage]) -> Bool
) async throws -> [KafkaConsumerMessage] {
    try await withConsumer(TestSupport.manualConsumerConfiguration(cluster)) { consumer in
        try await consumer.assign(KafkaPartitionAssignment.fromBeginning(topic, partitions: partitions))
        return try await consume(consumer, seconds: seconds, until: done)
    }
}

extension KafkaPartitionAssignment {
    /// Partitions `0..<partitions` of `topic`, each from its beginning.
    static func fromBeginning(_ topic: String, partitions: Int32) -> [KafkaPartitionAssignment] {
        (0..<partitions).map { KafkaPartitionAssignment(topic: topic, partition: $0, start: .beginning) }
    }
}

extension KafkaProducer {
    /// Sends `records` and fails unless every one is acknowledged.
    @discardableResult
    func sendAll(_ records: [KafkaProducerRecord]) async throws -> [KafkaDeliveryReport] {
        try await send(records).map { try $0.get() }
    }
}

/// The errors among send results.
func errors(in results: [Result<KafkaDeliveryReport, KafkaError>]) -> [KafkaError] {
    results.compactMap { result -> KafkaError? in
        if case .failure(let error) = result { return error }
        return nil
    }
}

/// The consumers a test starts; ``withConsumers(_:)`` shuts them all down when its body ends.
final class Consumers: Sendable {
    private let started = Locked<[KafkaConsumer]>([])

    /// Creates a consumer that is shut down with the others.
    func start(
        _ configuration: KafkaConsumerConfiguration, rebalanceHandler: KafkaRebalanceHandler = KafkaRebalanceHandler()
    ) throws(KafkaError) -> KafkaConsumer {
        let consumer = try KafkaConsumer(configuration: configuration, rebalanceHandler: rebalanceHandler, logger: TestSupport.logger)
        started.withLock { $0.append(consumer) }
        return consumer
    }

    func shutdown() async {
        for consumer in started.withLock({ $0 }).reversed() { await consumer.shutdown() }
    }
}

/// Runs `body` with a ``Consumers`` and shuts every consumer it started down afterwards, also
/// when `body` throws.
func withConsumers<T: Sendable>(_ body: (Consumers) async throws -> T) async throws -> T {
    try await withShutdown(Consumers(), shutdown: { await $0.shutdown() }, body)
}

/// Reads messages until `done` says so (or the timeout fails the test).
func consume(
    _ consumer: KafkaConsumer,
    seconds: Double,
    until done: @escaping @Sendable ([KafkaConsumerMessage]) -> Bool
) async throws -> [KafkaConsumerMessage] {
    try await withTimeout("consuming", seconds: seconds) {
        var received: [KafkaConsumerMessage] = []
        for try await message in consumer.messages {
            received.append(message)
            if done(received) { break }
        }
        return received
    }
}

extension KafkaProducerRecord {
    /// A record carrying a unique id in its value and headers.
    static func numbered(topic: String, _ number: Int, key: String? = nil) -> KafkaProducerRecord {
        KafkaProducerRecord(
            topic: topic,
            key: key.map { Array($0.utf8) },
            value: Array("message-\(number)".utf8),
            headers: [KafkaHeader(key: "id", string: "\(number)")]
        )
    }
}

extension KafkaProducerRecord {
    /// Numbered records for `range`, each keyed `k<number>`.
    static func keyed(topic: String, _ range: Range<Int>) -> [KafkaProducerRecord] {
        range.map { KafkaProducerRecord.numbered(topic: topic, $0, key: "k\($0)") }
    }

    /// Numbered records for `range`, each to the partition `partition` picks for its number, with
    /// timestamp `at` (default: the producer's clock).
    static func numbered(topic: String, _ range: Range<Int>, partition: (Int) -> Int32, at: Date? = nil) -> [KafkaProducerRecord] {
        range.map { number in
            var record = KafkaProducerRecord.numbered(topic: topic, number)
            record.partition = partition(number)
            record.timestampMilliseconds = at.map { Int64($0.timeIntervalSince1970 * 1000) }
            return record
        }
    }
}

/// Creates `topic` with `partitions` partitions on `cluster` and stores `records` in it (made for
/// the topic's name); returns the name.
func makeTopic(
    _ prefix: String, partitions: Int, on cluster: EmbeddedKafkaCluster,
    records: (String) -> [KafkaProducerRecord] = { _ in [] }
) async throws -> String {
    let topic = TestSupport.unique(prefix)
    try cluster.createTopic(topic, partitions: partitions)
    try await produce(records(topic), on: cluster)
    return topic
}

/// Stores `records` on `cluster` through a producer of its own, failing unless each is acknowledged.
func produce(_ records: [KafkaProducerRecord], on cluster: EmbeddedKafkaCluster) async throws {
    guard !records.isEmpty else { return }
    try await storeRecords(records, producer: TestSupport.producerConfiguration(cluster), logger: TestSupport.logger)
}

extension KafkaConsumerMessage {
    var id: Int? { header("id")?.stringValue.flatMap(Int.init) }
}
