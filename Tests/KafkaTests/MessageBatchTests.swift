import CallpushTestSupport
import Testing

@testable import Kafka

@Suite("Messages taken a batch at a time", .timeLimit(TestSupport.suiteTimeLimit))
struct MessageBatchTests {
    @Test("nextBatch hands out every message once, in partition order, continuing where next() stopped")
    func batchesCoverEveryMessageOnceInOrder() async throws {
        try await withTopic("batches", partitions: 2) { cluster, topic in
            let count = 600
            try await produce(KafkaProducerRecord.numbered(topic: topic, 0..<count, partition: { Int32($0 % 2) }), on: cluster)
            let consumer = try KafkaConsumer(
                configuration: TestSupport.consumerConfiguration(cluster, group: TestSupport.unique("g"), topics: [topic]),
                logger: TestSupport.logger
            )
            let (received, batches, largest) = try await withTimeout("every message", seconds: 40) {
                var iterator = consumer.messages.makeAsyncIterator()
                // One message alone first: the batch after it must not hand it out again.
                var received = [try #require(try await iterator.next())]
                var batches = 0
                var largest = 0
                while received.count < count, let batch = try await iterator.nextBatch() {
                    #expect(!batch.isEmpty, "a batch is never empty")
                    batches += 1
                    largest = max(largest, batch.count)
                    received += batch
                }
                return (received, batches, largest)
            }
            await consumer.shutdown()

            #expect(received.count == count)
            #expect(Set(received.compactMap(\.id)) == Set(0..<count), "each message once")
            for partition in [Int32(0), 1] {
                let offsets = received.filter { $0.partition == partition }.map(\.offset)
                #expect(offsets == offsets.sorted() && Set(offsets).count == offsets.count, "partition \(partition) in order")
            }
            #expect(batches < count - 1, "messages come several at a time (largest batch \(largest))")
        }
    }
}
