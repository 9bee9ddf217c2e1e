import Testing

@testable import Kafka

@Suite("Manual assignment", .timeLimit(.minutes(2)))
struct ManualAssignmentTests {
    @Test("offsets-for-times + manual assignment read a partition from a timestamp to the high watermark")
    func readFromTimestampToEnd() async throws {
        try await withCluster(brokers: 1) { cluster in
            let topic = TestSupport.unique("status")
            try cluster.createTopic(topic, partitions: 2)
            let base: Int64 = 1_700_000_000_000
            // Partition 1: 10 old records, then 15 newer ones; partition 0 gets noise.
            var records: [KafkaProducerRecord] = []
            for number in 0..<25 {
                var record = KafkaProducerRecord.numbered(topic: topic, number)
                record.partition = 1
                record.timestampMilliseconds = base + (number < 10 ? 0 : 60_000) + Int64(number)
                records.append(record)
            }
            records += (100..<110).map { number in
                var record = KafkaProducerRecord.numbered(topic: topic, number)
                record.partition = 0
                return record
            }
            try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
                _ = try await producer.send(records).map { try $0.get() }
            }

            let consumer = try KafkaConsumer(configuration: TestSupport.manualConsumerConfiguration(cluster), logger: TestSupport.logger)
            do {
                let start = try await consumer.offsetsForTimes(topic: topic, partition: 1, timestampMilliseconds: base + 60_000)
                #expect(start == 10)
                let watermarks = try await consumer.queryWatermarks(topic: topic, partition: 1)
                #expect(watermarks.low == 0)
                #expect(watermarks.high == 25)
                let future = try await consumer.offsetsForTimes(topic: topic, partition: 1, timestampMilliseconds: base + 3_600_000)
                #expect(future == nil, "no record at or after a future timestamp")

                try await consumer.assign([KafkaPartitionAssignment(topic: topic, partition: 1, start: .offset(try #require(start)))])
                let received = try await consume(consumer, seconds: 20) { $0.last.map { $0.offset >= watermarks.high - 1 } ?? false }
                #expect(received.map(\.offset) == Array(10..<25))
                #expect(received.compactMap(\.id) == Array(10..<25))
                #expect(received.allSatisfy { $0.partition == 1 && $0.timestampMilliseconds.map { $0 >= base + 60_000 } == true })

                // Seek back: the partition is read again from the new position.
                try await consumer.seek(topic: topic, partition: 1, offset: 20)
                let again = try await consume(consumer, seconds: 20) { $0.count >= 5 }
                #expect(again.map(\.offset) == Array(20..<25))
            } catch {
                await consumer.shutdown()
                throw error
            }
            await consumer.shutdown()
        }
    }

    @Test("storing an offset for a partition that is not assigned is a typed not-assigned error")
    func storeUnassigned() async throws {
        try await withCluster(brokers: 1) { cluster in
            let topic = TestSupport.unique("store")
            try cluster.createTopic(topic, partitions: 1)
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
