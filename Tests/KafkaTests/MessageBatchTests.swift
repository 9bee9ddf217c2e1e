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

@Suite("The consumer's buffer holds only what it has not handed out")
struct ConsumerBufferRetentionTests {
    /// A batch handed to the application is the application's: the buffer must not keep it alive.
    /// (It did: taken batches stayed in the buffer's array until 64 of them had been taken or the
    /// buffer ran empty, so a worker that kept the buffer non-empty held ~65,000 processed messages.)
    @Test("a taken batch is released by the buffer at once, however long the buffer stays non-empty")
    func takenBatchesAreNotRetained() {
        let partition = KafkaTopicPartition(topic: "t", partition: 0)
        var state = ConsumerStateMachine()
        state.replaceAssignment([partition])
        let batchSize = 100
        var offset: Int64 = 0
        func batch() -> MessageBatch {
            defer { offset += Int64(batchSize) }
            return MessageBatch(epoch: state.epoch, messages: (0..<batchSize).map { index in
                KafkaConsumerMessage(topic: "t", partition: 0, offset: offset + Int64(index), key: nil,
                                     value: Array(repeating: 7, count: 512), fetchEpoch: state.epoch)
            })
        }
        // The application takes a batch whenever the poll thread adds one, so the buffer never runs empty.
        _ = state.append(batch(), limits: .init(messages: .max, bytes: .max))
        for round in 1...50 {
            _ = state.append(batch(), limits: .init(messages: .max, bytes: .max))
            guard case .batch = state.next() else { Issue.record("round \(round): expected a batch"); return }
            #expect(state.bufferedCount == batchSize, "round \(round)")
            #expect(state.retainedMessageCount == state.bufferedCount,
                    "round \(round): the buffer keeps \(state.retainedMessageCount) messages for \(state.bufferedCount) not yet taken")
        }
        // And a batch given back, then taken again, is not retained either.
        guard case .batch(let taken) = state.next() else { Issue.record("expected the last batch"); return }
        #expect(state.giveBack(taken) == nil)
        #expect(state.retainedMessageCount == batchSize)
        guard case .batch = state.next() else { Issue.record("expected the given-back batch"); return }
        #expect(state.retainedMessageCount == 0)
    }
}
