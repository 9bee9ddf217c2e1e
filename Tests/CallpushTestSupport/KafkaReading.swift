import Kafka
import Logging

/// Reads records from explicit partitions (manual assignment) until `count` arrived or `seconds`
/// passed, whichever is first: a bounded look at what a test's services wrote.
public func readRecords(kafka: KafkaConfiguration, from assignments: [KafkaPartitionAssignment], count: Int,
                        seconds: Double, logger: Logger) async throws -> [KafkaConsumerMessage] {
    let consumer = try KafkaConsumer(configuration: KafkaConsumerConfiguration(kafka: kafka, mode: .manual), logger: logger)
    try await consumer.assign(assignments)
    let timer = Task {
        try? await Task.sleep(for: .seconds(seconds))
        await consumer.shutdown()
    }
    var messages: [KafkaConsumerMessage] = []
    for try await message in consumer.messages {
        messages.append(message)
        if messages.count >= count { break }
    }
    timer.cancel()
    await consumer.shutdown()
    return messages
}

extension EmbeddedKafkaCluster {
    /// Client settings that make the embedded cluster quick to test against: metadata refreshed
    /// every second, short fetch waits, frequent auto-commits, fast reconnects.
    public static let fastTestProperties = [
        "topic.metadata.refresh.interval.ms": "1000",
        "fetch.wait.max.ms": "20",
        "auto.commit.interval.ms": "200",
        "reconnect.backoff.ms": "50",
        "reconnect.backoff.max.ms": "500",
    ]

    /// A client configuration for this cluster with ``fastTestProperties``.
    public func fastTestConfiguration(clientID: String) -> KafkaConfiguration {
        KafkaConfiguration(bootstrapServers: [bootstrapServers], clientID: clientID, properties: Self.fastTestProperties)
    }
}

/// Stores `records` through a producer of its own, shut down afterwards; throws unless every
/// record is acknowledged.
public func storeRecords(_ records: [KafkaProducerRecord], producer configuration: KafkaProducerConfiguration,
                         logger: Logger) async throws {
    let producer = try KafkaProducer(configuration: configuration, logger: logger)
    try await withShutdown(producer, shutdown: { await $0.shutdown() }) { producer in
        _ = try await producer.send(records).map { try $0.get() }
    }
}
