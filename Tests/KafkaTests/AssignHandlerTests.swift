import CallpushTestSupport
import Foundation
import Locking
import Testing

@testable import Kafka

/// Which assign handler calls have returned, per consumer: a message may reach the application
/// only once the handler of its partition's current assignment returned.
final class AssignHandlerLog: Sendable {
    private struct State {
        var nextCall = 0
        /// The assign call each partition's current assignment came with.
        var current: [Int32: Int] = [:]
        var returned: Set<Int> = []
        var calls: [[Int32]] = []
    }
    private let state = Locked(State())

    /// An assign handler call began; returns its id.
    func begin(_ partitions: [KafkaTopicPartition]) -> Int {
        state.withLock { state in
            state.nextCall += 1
            for partition in partitions { state.current[partition.partition] = state.nextCall }
            state.calls.append(partitions.map(\.partition).sorted())
            return state.nextCall
        }
    }

    func end(_ call: Int) { state.withLock { _ = $0.returned.insert(call) } }

    func revoke(_ partitions: [KafkaTopicPartition]) {
        state.withLock { state in for partition in partitions { state.current[partition.partition] = nil } }
    }

    /// Whether the assign handler of `partition`'s current assignment has returned.
    func handlerReturned(for partition: Int32) -> Bool {
        state.withLock { state in state.current[partition].map { state.returned.contains($0) } ?? false }
    }

    var calls: [[Int32]] { state.withLock { $0.calls } }
    var started: Int { state.withLock { $0.nextCall } }

    /// A handler that records its call and sleeps `duration` before it returns.
    func slowHandler(_ duration: Duration) -> KafkaRebalanceHandler {
        KafkaRebalanceHandler(
            onAssign: { partitions in
                let call = self.begin(partitions)
                try? await Task.sleep(for: duration)
                self.end(call)
            },
            onRevoke: { partitions in self.revoke(partitions) }
        )
    }
}

/// What a consumer handed to the application, and whether it came too early.
final class DeliveryLog: Sendable {
    struct Delivery: Sendable {
        var consumer: String
        var partition: Int32
        var id: Int
        var early: Bool
    }
    private let state = Locked<[Delivery]>([])

    func record(_ delivery: Delivery) { state.withLock { $0.append(delivery) } }
    var all: [Delivery] { state.withLock { $0 } }
    var ids: Set<Int> { Set(all.map(\.id)) }

    /// Reads `consumer` until it shuts down, checking every message against `handlers` as it arrives.
    func read(_ consumer: KafkaConsumer, name: String, handlers: AssignHandlerLog) -> Task<Void, any Error> {
        Task {
            for try await message in consumer.messages {
                let early = !handlers.handlerReturned(for: message.partition)
                record(Delivery(consumer: name, partition: message.partition, id: message.id ?? -1, early: early))
            }
        }
    }
}

@Suite("Assign handler", .timeLimit(TestSupport.suiteTimeLimit))
struct AssignHandlerTests {
    /// Numbered records spread over two partitions.
    static func records(_ topic: String, _ range: Range<Int>) -> [KafkaProducerRecord] {
        KafkaProducerRecord.numbered(topic: topic, range, partition: { Int32($0 % 2) })
    }

    /// A group configuration for `topic` whose poll thread waits 1 s for an assign handler.
    static func configuration(_ cluster: EmbeddedKafkaCluster, topic: String) -> KafkaConsumerConfiguration {
        var configuration = TestSupport.consumerConfiguration(cluster, group: TestSupport.unique("assign"), topics: [topic])
        configuration.assignTimeout = .seconds(1)
        return configuration
    }

    @Test("an assign handler slower than assignTimeout: no message before it returned, every message after it, in order, once")
    func slowAssignHandlerHoldsItsPartitionsBack() async throws {
        try await withCluster(brokers: 1) { cluster in
            let topic = try await makeTopic("slow-assign", partitions: 2, on: cluster) { Self.records($0, 0..<100) }
            try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
                let handlers = AssignHandlerLog()
                let deliveries = DeliveryLog()
                let reading = try await withConsumers { consumers in
                    let consumer = try consumers.start(Self.configuration(cluster, topic: topic),
                                                       rebalanceHandler: handlers.slowHandler(.seconds(3)))
                    let reading = deliveries.read(consumer, name: "a", handlers: handlers)
                    try await withTimeout("the assign handler starting", seconds: 30) {
                        while handlers.started == 0 { try await Task.sleep(for: .milliseconds(10)) }
                    }
                    // Past the layer's bound, while the handler still runs: more messages arrive.
                    try await Task.sleep(for: .milliseconds(1500))
                    try await producer.sendAll(Self.records(topic, 100..<200))
                    try await withTimeout("every message delivered", seconds: 30) {
                        while deliveries.ids.count < 200 { try await Task.sleep(for: .milliseconds(20)) }
                    }
                    // Anything delivered twice would arrive right behind the rest.
                    try await Task.sleep(for: .milliseconds(1000))
                    return reading
                }
                _ = await reading.result

                let all = deliveries.all
                #expect(handlers.calls == [[0, 1]], "one assignment, no rebalance in between: \(handlers.calls)")
                let early = all.filter(\.early).map(\.id)
                #expect(early.count == 0, "\(early.count) delivered before the assign handler returned, e.g. \(early.prefix(5))")
                #expect(deliveries.ids == Set(0..<200), "every message delivered")
                #expect(all.count == 200, "each once: \(all.count)")
                for partition in [Int32(0), 1] {
                    let ids = all.filter { $0.partition == partition }.map(\.id)
                    #expect(ids == ids.sorted(), "partition \(partition) in order")
                }
            }
        }
    }

    @Test("a revoke while a slow assign handler still runs: the group moves on and nothing comes before its handler returned")
    func revokeDuringSlowAssignHandler() async throws {
        try await withCluster(brokers: 1) { cluster in
            let topic = try await makeTopic("revoke-slow", partitions: 2, on: cluster) { Self.records($0, 0..<200) }
            let configuration = Self.configuration(cluster, topic: topic)
            let handlersA = AssignHandlerLog()
            let handlersB = AssignHandlerLog()
            let deliveries = DeliveryLog()
            let readers = try await withConsumers { consumers in
                let a = try consumers.start(configuration, rebalanceHandler: handlersA.slowHandler(.seconds(4)))
                let readingA = deliveries.read(a, name: "a", handlers: handlersA)
                try await withTimeout("A's assign handler starting", seconds: 30) {
                    while handlersA.started == 0 { try await Task.sleep(for: .milliseconds(10)) }
                }
                // A's poll thread stopped waiting after 1 s; its handler runs 3 s more. B joins now:
                // the eager rebalance revokes A's partitions while A's first handler still runs.
                try await Task.sleep(for: .milliseconds(1500))
                let b = try consumers.start(configuration, rebalanceHandler: handlersB.slowHandler(.zero))
                let readingB = deliveries.read(b, name: "b", handlers: handlersB)
                try await withTimeout("every message delivered after the rebalance", seconds: 60) {
                    while deliveries.ids.count < 200 { try await Task.sleep(for: .milliseconds(20)) }
                }
                return [readingA, readingB]
            }
            for reader in readers { _ = await reader.result }

            let all = deliveries.all
            #expect(handlersA.calls.count >= 2, "A was revoked and assigned again: \(handlersA.calls)")
            #expect(!handlersB.calls.isEmpty, "B got partitions")
            let early = all.filter(\.early).map { "\($0.consumer):\($0.id)" }
            #expect(early.count == 0, "\(early.count) delivered before the handler of their assignment returned, e.g. \(early.prefix(5))")
            #expect(deliveries.ids == Set(0..<200), "every message delivered")
        }
    }

    @Test("an assign handler finishing after its partitions were revoked and assigned again does not resume the new assignment")
    func staleAssignHandlerCompletionResumesNothing() {
        let partition = KafkaTopicPartition(topic: "t", partition: 0)
        var state = ConsumerStateMachine()
        state.assign([partition])
        let first = state.epoch
        let held = state.pauseChanges()
        #expect(held.pause == [partition], "held while its handler runs")
        state.revoke([partition])
        state.endRevoke()
        let afterRevoke = state.pauseChanges()
        #expect(afterRevoke.resume == [partition], "a revoked partition is not left paused")
        state.assign([partition])
        let second = state.epoch
        let heldAgain = state.pauseChanges()
        #expect(heldAgain.pause == [partition])
        let staleReleased = state.assignHandlerFinished(epoch: first)
        #expect(!staleReleased, "the old handler's completion releases nothing")
        let afterStale = state.pauseChanges()
        #expect(afterStale.pause.isEmpty && afterStale.resume.isEmpty)
        #expect(state.isFetchPaused(partition))
        let released = state.assignHandlerFinished(epoch: second)
        #expect(released)
        let afterHandler = state.pauseChanges()
        #expect(afterHandler.resume == [partition])
        #expect(!state.isFetchPaused(partition))
    }
}
