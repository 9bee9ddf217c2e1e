import CallpushTestSupport
import Testing

@testable import Kafka

/// A consumer-lag gauge needs to know which partitions' cached high watermark has stopped moving.
@Suite("Fetch paused", .timeLimit(TestSupport.suiteTimeLimit))
struct FetchPausedTests {
    @Test("while back-pressure pauses fetching, isFetchPaused says so and only the broker knows the real end")
    func backpressurePauseIsVisible() async throws {
        try await withTopic("lag", partitions: 1, brokers: 1) { cluster, topic in
            try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
                try await producer.sendAll((0..<200).map { KafkaProducerRecord.numbered(topic: topic, $0) })
                var configuration = TestSupport.consumerConfiguration(cluster, group: TestSupport.unique("lag"), topics: [topic])
                configuration.maxBufferedMessages = 40
                try await withConsumer(configuration) { consumer in
                    #expect(!consumer.isFetchPaused(topic: topic, partition: 0), "not assigned yet")
                    // The application does not read: the buffer fills and fetching pauses.
                    try await withTimeout("back-pressure pausing the partition", seconds: 30) {
                        while !consumer.isFetchPaused(topic: topic, partition: 0) { try await Task.sleep(for: .milliseconds(20)) }
                    }
                    let cached = consumer.cachedHighWatermark(topic: topic, partition: 0)
                    try await producer.sendAll((200..<1200).map { KafkaProducerRecord.numbered(topic: topic, $0) })
                    try await Task.sleep(for: .milliseconds(1500))
                    #expect(consumer.cachedHighWatermark(topic: topic, partition: 0) == cached, "the cached end froze while paused")
                    #expect(try await consumer.queryWatermarks(topic: topic, partition: 0).high == 1200, "the broker knows the real end")

                    // Reading drains the buffer: fetching resumes and the cached end catches up.
                    _ = try await consume(consumer, seconds: 30) { $0.count >= 1200 }
                    // The poll thread resumes librdkafka's fetching after the read, on its own time.
                    try await withTimeout("fetching resuming", seconds: 30) {
                        while consumer.isFetchPaused(topic: topic, partition: 0) { try await Task.sleep(for: .milliseconds(20)) }
                    }
                    try await withTimeout("the cached end catching up", seconds: 30) {
                        while consumer.cachedHighWatermark(topic: topic, partition: 0) != 1200 { try await Task.sleep(for: .milliseconds(20)) }
                    }
                }
            }
        }
    }

    @Test("a partition the application paused is fetch-paused until resumed; others are not")
    func applicationPauseIsVisible() async throws {
        try await withTopic("paused", partitions: 2, brokers: 1) { cluster, topic in
            let consumer = try KafkaConsumer(configuration: TestSupport.manualConsumerConfiguration(cluster), logger: TestSupport.logger)
            try await consumer.assign(KafkaPartitionAssignment.fromBeginning(topic, partitions: 2))
            let zero = KafkaTopicPartition(topic: topic, partition: 0)
            try await consumer.pause([zero])
            #expect(consumer.isFetchPaused(topic: topic, partition: 0))
            #expect(!consumer.isFetchPaused(topic: topic, partition: 1))
            try await consumer.resume([zero])
            #expect(!consumer.isFetchPaused(topic: topic, partition: 0))
            await consumer.shutdown()
        }
    }
}
