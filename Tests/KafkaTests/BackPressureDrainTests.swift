import Testing

@testable import Kafka

/// The consumer drains a backlog many times larger than its buffer, through many
/// pause (buffer full) / resume (half drained) cycles, over many partitions: every message
/// arrives, in order per partition, and nothing is skipped or repeated.
@Suite("Consumer back-pressure drain", .timeLimit(.minutes(2)))
struct BackPressureDrainTests {
    static let partitions: Int32 = 16
    static let messages = 12_000
    static let buffer = 150

    @Test("manual assignment: a backlog 80× the buffer drains completely through pause/resume")
    func manualDrain() async throws {
        try await withCluster(brokers: 1) { cluster in
            let topic = try await Self.produceBacklog(cluster)
            var configuration = TestSupport.manualConsumerConfiguration(cluster)
            configuration.maxBufferedMessages = Self.buffer
            let consumer = try KafkaConsumer(configuration: configuration, logger: TestSupport.logger)
            do {
                try await consumer.assign((0..<Self.partitions).map { KafkaPartitionAssignment(topic: topic, partition: $0, start: .beginning) })
                let received = try await Self.drainSlowly(consumer)
                try Self.expectComplete(received, consumer: consumer)
            } catch {
                await consumer.shutdown()
                throw error
            }
            await consumer.shutdown()
        }
    }

    @Test("group member: a backlog 80× the buffer drains completely through pause/resume")
    func groupDrain() async throws {
        try await withCluster(brokers: 1) { cluster in
            let topic = try await Self.produceBacklog(cluster)
            var configuration = TestSupport.consumerConfiguration(cluster, group: TestSupport.unique("drain"), topics: [topic])
            configuration.maxBufferedMessages = Self.buffer
            let consumer = try KafkaConsumer(configuration: configuration, logger: TestSupport.logger)
            do {
                let received = try await Self.drainSlowly(consumer)
                try Self.expectComplete(received, consumer: consumer)
            } catch {
                await consumer.shutdown()
                throw error
            }
            await consumer.shutdown()
        }
    }

    /// Produces `messages` numbered records spread evenly over `partitions` partitions.
    static func produceBacklog(_ cluster: EmbeddedKafkaCluster) async throws -> String {
        let topic = TestSupport.unique("drain")
        try cluster.createTopic(topic, partitions: Int(partitions))
        try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
            let records = (0..<messages).map { number in
                var record = KafkaProducerRecord.numbered(topic: topic, number)
                record.partition = Int32(number % Int(partitions))
                return record
            }
            _ = try await producer.send(records).map { try $0.get() }
        }
        return topic
    }

    /// Reads every message, pausing now and then so the buffer fills up again and again.
    static func drainSlowly(_ consumer: KafkaConsumer) async throws -> [KafkaConsumerMessage] {
        try await withTimeout("draining \(messages) messages through a \(buffer)-message buffer", seconds: 90) {
            var received: [KafkaConsumerMessage] = []
            received.reserveCapacity(messages)
            for try await message in consumer.messages {
                received.append(message)
                if received.count % 600 == 0 { try await Task.sleep(for: .milliseconds(25)) }
                if received.count == messages { break }
            }
            return received
        }
    }

    static func expectComplete(_ received: [KafkaConsumerMessage], consumer: KafkaConsumer) throws {
        let pauses = consumer.state.withLock { $0.backpressurePauses }
        #expect(pauses >= 5, "the buffer filled and fetching paused repeatedly (\(pauses) pauses)")
        let ids = received.compactMap(\.id)
        #expect(ids.count == messages)
        #expect(Set(ids) == Set(0..<messages), "every message arrived exactly once")
        let byPartition = Dictionary(grouping: received, by: \.partition)
        for partition in 0..<partitions {
            let offsets = try #require(byPartition[partition]).map(\.offset)
            #expect(offsets == Array(0..<Int64(messages / Int(partitions))), "partition \(partition) in order, no gap")
        }
    }
}
