import Locking
import Testing

@testable import Kafka

/// librdkafka keeps a partition paused across unassign and re-assign, and (2.0.2) restarts the
/// fetch of a partition from an old position when it is resumed without being paused. The
/// consumer must leave neither a re-assigned partition stuck nor re-deliver what it handed out.
@Suite("Consumer pause across a rebalance", .timeLimit(TestSupport.suiteTimeLimit))
struct PauseAcrossRebalanceTests {
    static let partitions: Int32 = 4
    static let messages = 2_000

    @Test("a member paused by back-pressure during a rebalance consumes the partitions it gets back")
    func backpressurePausedMemberResumesAfterRebalance() async throws {
        try await withCluster(brokers: 1) { cluster in
            let topic = TestSupport.unique("repause")
            try cluster.createTopic(topic, partitions: Int(Self.partitions))
            try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
                let records = (0..<Self.messages).map { number in
                    var record = KafkaProducerRecord.numbered(topic: topic, number)
                    record.partition = Int32(number % Int(Self.partitions))
                    return record
                }
                _ = try await producer.send(records).map { try $0.get() }
            }
            var configuration = TestSupport.consumerConfiguration(cluster, group: TestSupport.unique("repause"), topics: [topic])
            configuration.maxBufferedMessages = 40
            let assignments = Locked<[[KafkaTopicPartition]]>([])
            let handler = KafkaRebalanceHandler(onAssign: { partitions in assignments.withLock { $0.append(partitions) } })
            let a = try KafkaConsumer(configuration: configuration, rebalanceHandler: handler, logger: TestSupport.logger)
            var b: KafkaConsumer?
            do {
                // A's application does not read yet: its buffer fills and fetching pauses.
                try await withTimeout("member A pausing for back-pressure", seconds: 30) {
                    while a.backpressurePauseCount == 0 { try await Task.sleep(for: .milliseconds(20)) }
                }
                // B joins: the eager rebalance revokes all of A's (paused) partitions and gives some back.
                let joining = try KafkaConsumer(configuration: configuration, logger: TestSupport.logger)
                b = joining
                let fromB = Task { try await consume(joining, seconds: 60) { _ in false } }
                try await withTimeout("the rebalance reaching A", seconds: 30) {
                    while assignments.withLock({ $0.count }) < 2 { try await Task.sleep(for: .milliseconds(20)) }
                }
                let kept = try #require(assignments.withLock { $0.last })
                #expect(!kept.isEmpty && kept.count < Int(Self.partitions), "A got part of the topic back: \(kept)")
                let expected = Self.messages / Int(Self.partitions) * kept.count
                let fromA = try await consume(a, seconds: 30) { received in
                    received.count >= expected && Set(received.compactMap(\.id)).count >= expected
                }
                fromB.cancel()
                let partitionsOfA = Set(kept.map(\.partition))
                #expect(fromA.allSatisfy { partitionsOfA.contains($0.partition) })
                let ids = fromA.compactMap(\.id)
                let ofA = Set((0..<Self.messages).filter { partitionsOfA.contains(Int32($0 % Int(Self.partitions))) })
                #expect(Set(ids) == ofA, "every message of A's partitions arrived")
                // Nothing re-delivered, unless a further rebalance moved the partitions again
                // (A stores no offsets, so a later assignment starts over: at least once).
                if assignments.withLock({ $0.count }) == 2 {
                    #expect(ids.count == ofA.count, "each once")
                }
            } catch {
                await b?.shutdown()
                await a.shutdown()
                throw error
            }
            await b?.shutdown()
            await a.shutdown()
        }
    }
}
