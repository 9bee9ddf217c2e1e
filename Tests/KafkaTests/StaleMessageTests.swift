import CallpushTestSupport
import Foundation
import Locking
import Testing

@testable import Kafka

/// A message an application still holds when its partition is revoked and then assigned to the
/// same consumer again. The new assignment re-delivers from the committed offset, which may be
/// below the held message; storing the held message's offset would skip the messages in between.
@Suite("Stale messages across re-assignment", .timeLimit(TestSupport.suiteTimeLimit))
struct StaleMessageTests {
    @Test("a message held across revoke and re-assignment is stale: not current, its offset refused; the partition starts again below it")
    func heldMessageIsStaleAfterReassignment() async throws {
        try await withTopic("held", partitions: 2) { cluster, topic in
            let configuration = TestSupport.consumerConfiguration(cluster, group: TestSupport.unique("workers"), topics: [topic])
            let assignments = Locked<[[Int32]]>([])
            let a = try KafkaConsumer(
                configuration: configuration,
                rebalanceHandler: KafkaRebalanceHandler(onAssign: { partitions in
                    assignments.withLock { $0.append(partitions.map(\.partition).sorted()) }
                }),
                logger: TestSupport.logger
            )
            try await produce(KafkaProducerRecord.keyed(topic: topic, 0..<40), on: cluster)

            // Hold a message that is not its partition's first; store nothing.
            let held = try await withTimeout("a message past its partition's first", seconds: 30) {
                for try await message in a.messages where message.offset >= 1 { return message }
                throw TestTimeout(what: "consumer ended")
            }
            #expect(a.isCurrent(held))

            // B joins (eager: A's partitions are revoked and split), then leaves (A gets both back).
            let b = try KafkaConsumer(configuration: configuration, logger: TestSupport.logger)
            try await withTimeout("B joined", seconds: 30) {
                while assignments.withLock({ $0.count }) < 2 { try await Task.sleep(for: .milliseconds(50)) }
            }
            await b.shutdown()
            try await withTimeout("A owns both partitions again", seconds: 30) {
                while assignments.withLock({ $0.count < 3 || $0.last != [0, 1] }) { try await Task.sleep(for: .milliseconds(50)) }
            }

            #expect(!a.isCurrent(held), "held across a revoke: stale although its partition is assigned again")
            let refused = Result { () throws(KafkaError) in try a.storeOffset(for: held) }
            #expect(throws: KafkaError.self, "storing the stale message's offset would skip re-delivered messages") {
                try refused.get()
            }
            if case .failure(let error) = refused { #expect(error.code == .notAssigned) }

            // The new assignment delivers the partition again from below the held message; those are current.
            let redelivered = try await withTimeout("the held message's partition again", seconds: 30) {
                for try await message in a.messages where message.partition == held.partition { return message }
                throw TestTimeout(what: "consumer ended")
            }
            #expect(redelivered.offset < held.offset, "re-delivery starts at the committed offset (nothing was stored)")
            #expect(a.isCurrent(redelivered))
            try a.storeOffset(for: redelivered)
            await a.shutdown()
        }
    }
}
