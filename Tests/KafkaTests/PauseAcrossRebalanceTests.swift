import CallpushTestSupport
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
            let topic = try await makeTopic("repause", partitions: Int(Self.partitions), on: cluster) { topic in
                KafkaProducerRecord.numbered(topic: topic, 0..<Self.messages, partition: { Int32($0 % Int(Self.partitions)) })
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
                // A consumes every message of the partitions it holds. Under load a further rebalance can move
                // partitions again (e.g. B's session times out and it rejoins), so "the partitions it holds"
                // is A's latest assignment, read on every check; a partition left stuck still fails the test.
                let latest: @Sendable () -> Set<Int32> = { Set(assignments.withLock { $0.last ?? [] }.map(\.partition)) }
                let messages: @Sendable (Set<Int32>) -> Set<Int> = { partitions in
                    Set((0..<Self.messages).filter { partitions.contains(Int32($0 % Int(Self.partitions))) })
                }
                let fromA = try await consume(a, seconds: 30) { received in
                    let held = latest()
                    let ids = Set(received.filter { held.contains($0.partition) }.compactMap(\.id))
                    return !held.isEmpty && ids.isSuperset(of: messages(held))
                }
                fromB.cancel()
                let held = latest()
                let ids = fromA.filter { held.contains($0.partition) }.compactMap(\.id)
                #expect(Set(ids) == messages(held), "every message of A's partitions arrived")
                if assignments.withLock({ $0.count }) == 2 {
                    // No further rebalance: A only got its own partitions, each message once (A stores no
                    // offsets, so a later assignment would start over: at least once).
                    #expect(held == Set(kept.map(\.partition)))
                    #expect(fromA.allSatisfy { held.contains($0.partition) })
                    #expect(ids.count == messages(held).count, "each once")
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
