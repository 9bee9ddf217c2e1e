import Testing

@testable import Kafka

@Suite("Manual assignment", .timeLimit(TestSupport.suiteTimeLimit))
struct ManualAssignmentTests {
    @Test("offsets-for-times + manual assignment read a partition from a timestamp to the high watermark")
    func readFromTimestampToEnd() async throws {
        try await withTopic("status", partitions: 2, brokers: 1) { cluster, topic in
            let base: Int64 = 1_700_000_000_000
            // Partition 1: 10 old records, then 15 newer ones; partition 0 gets noise.
            var records: [KafkaProducerRecord] = []
            for number in 0..<25 {
                var record = KafkaProducerRecord.numbered(topic: topic, number)
                record.partition = 1
                record.timestampMilliseconds = base + (number < 10 ? 0 : 60_000) + Int64(number)
                records.append(record)
            }
            records += KafkaProducerRecord.numbered(topic: topic, 100..<110, partition: { _ in 0 })
            try await produce(records, on: cluster)

            try await withConsumer(TestSupport.manualConsumerConfiguration(cluster)) { consumer in
                let watermarks = try await consumer.queryWatermarks(topic: topic, partition: 1)
                #expect(watermarks.low == 0)
                #expect(watermarks.high == 25)
                let start = try await consumer.startOffset(topic: topic, partition: 1, notBefore: base + 60_000)
                // A real broker answers 10; the mock cluster has no timestamp lookup, so the layer
                // falls back to the low watermark (0). Either way nothing at or after the timestamp is missed.
                #expect(start == 10 || start == watermarks.low)
                let empty = try await consumer.startOffset(topic: topic, partition: 0, notBefore: base)
                #expect(empty == 0, "every message of partition 0 is newer than the timestamp")

                try await consumer.assign([KafkaPartitionAssignment(topic: topic, partition: 1, start: .offset(start))])
                let read = try await consume(consumer, seconds: 20) { $0.last.map { $0.offset >= watermarks.high - 1 } ?? false }
                #expect(read.map(\.offset) == Array(start..<watermarks.high), "read to the high watermark, in order")
                let recent = read.filter { ($0.timestampMilliseconds ?? 0) >= base + 60_000 }
                #expect(recent.compactMap(\.id) == Array(10..<25))
                #expect(recent.map(\.offset) == Array(10..<25))

                // Seek back: the partition is read again from the new position.
                try await consumer.seek(topic: topic, partition: 1, offset: 20)
                let again = try await consume(consumer, seconds: 20) { $0.count >= 5 }
                #expect(again.map(\.offset) == Array(20..<25))
            }
        }
    }

    @Test("the cached high watermark is unknown before the first fetch and follows the partition's end after")
    func cachedHighWatermarkFollowsFetches() async throws {
        try await withTopic("watermark", partitions: 2, brokers: 1) { cluster, topic in
            func produceToPartition1(_ numbers: Range<Int>) async throws {
                try await produce(KafkaProducerRecord.numbered(topic: topic, numbers, partition: { _ in 1 }), on: cluster)
            }
            try await produceToPartition1(0..<25)
            try await withConsumer(TestSupport.manualConsumerConfiguration(cluster)) { consumer in
                #expect(consumer.cachedHighWatermark(topic: topic, partition: 1) == nil, "nothing fetched yet")
                try await consumer.assign([KafkaPartitionAssignment(topic: topic, partition: 1, start: .beginning)])
                _ = try await consume(consumer, seconds: 20) { $0.count >= 25 }
                #expect(consumer.cachedHighWatermark(topic: topic, partition: 1) == 25)
                #expect(consumer.cachedHighWatermark(topic: topic, partition: 0) == nil, "not assigned")

                try await produceToPartition1(25..<40)
                let more = try await consume(consumer, seconds: 20) { $0.count >= 15 }
                #expect(more.map(\.offset) == Array(25..<40))
                #expect(consumer.cachedHighWatermark(topic: topic, partition: 1) == 40)
            }
        }
    }

    @Test("storing an offset for a partition that is not assigned is a typed not-assigned error")
    func storeUnassigned() async throws {
        try await withTopic("store", partitions: 1, brokers: 1) { cluster, topic in
            let consumer = try KafkaConsumer(configuration: TestSupport.manualConsumerConfiguration(cluster), logger: TestSupport.logger)
            let error = #expect(throws: KafkaError.self) {
                try consumer.store(topic: topic, partition: 0, offset: 1)
            }
            #expect(error?.code == .notAssigned)
            await consumer.shutdown()
            let afterShutdown = #expect(throws: KafkaError.self) {
                try consumer.store(topic: topic, partition: 0, offset: 1)
            }
            #expect(afterShutdown?.code == .shutdown)
        }
    }
}

@Suite("Consumer back-pressure", .timeLimit(TestSupport.suiteTimeLimit))
struct ConsumerBackPressureTests {
    @Test("a slow application keeps the consumer's buffer bounded, and nothing is lost when it catches up")
    func boundedBuffer() async throws {
        try await withCluster(brokers: 1) { cluster in
            let topic = try await makeTopic("backlog", partitions: 2, on: cluster) { topic in
                (0..<3000).map { KafkaProducerRecord.numbered(topic: topic, $0) }
            }
            var configuration = TestSupport.manualConsumerConfiguration(cluster)
            configuration.maxBufferedMessages = 100
            try await withConsumer(configuration) { consumer in
                try await consumer.assign(KafkaPartitionAssignment.fromBeginning(topic, partitions: 2))
                // The application does not read for a while: fetching pauses at the bound.
                let first = try await consume(consumer, seconds: 20) { $0.count >= 1 }
                try await Task.sleep(for: .seconds(1.5))
                let buffered = consumer.state.withLock { $0.bufferedCount }
                // The bound plus two batches (a quarter of the bound each): one collected while the
                // buffer filled, and the rest of the batch the first iterator held and handed back
                // when it stopped after one message.
                #expect(buffered <= 150, "buffer bounded (1.5 × maxBufferedMessages), was \(buffered)")
                #expect(buffered > 0)
                // Catching up: fetching resumes and every message arrives once.
                let rest = try await consume(consumer, seconds: 30) { $0.count >= 2999 }
                let ids = (first + rest).compactMap(\.id)
                #expect(ids.count == 3000)
                #expect(Set(ids) == Set(0..<3000))
            }
        }
    }
}
