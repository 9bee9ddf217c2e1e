import Synchronization
import Testing

@testable import Kafka

/// Collects the ids whose offsets consumers stored (i.e. finished work), from several tasks,
/// and wakes waiters when a condition becomes true.
final class ProcessedLog: Sendable {
    private struct State {
        var ids: [Int: Int] = [:]
        var byConsumer: [String: Set<Int>] = [:]
        var nextID = 0
        var waiters: [(id: Int, condition: @Sendable (Set<Int>) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())

    func record(_ id: Int, by consumer: String) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.ids[id, default: 0] += 1
            state.byConsumer[consumer, default: []].insert(id)
            let ids = Set(state.ids.keys)
            let (ready, waiting) = (state.waiters.filter { $0.condition(ids) }, state.waiters.filter { !$0.condition(ids) })
            state.waiters = waiting
            return ready.map(\.continuation)
        }
        for waiter in ready { waiter.resume() }
    }

    var distinctCount: Int { state.withLock { $0.ids.count } }
    var ids: Set<Int> { state.withLock { Set($0.ids.keys) } }
    func ids(of consumer: String) -> Set<Int> { state.withLock { $0.byConsumer[consumer] ?? [] } }

    /// Returns once `condition` holds for the recorded ids (bound it with `withTimeout`).
    func wait(until condition: @escaping @Sendable (Set<Int>) -> Bool) async {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if condition(Set(state.ids.keys)) || Task.isCancelled { return true }
                    state.waiters.append((id, condition, continuation))
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume()
        }
    }
}

/// Processes messages of `consumer` until the sequence ends (shutdown): runs `work`, stores
/// the offset and records the id as finished only if the store succeeded.
func process(
    _ consumer: KafkaConsumer,
    name: String,
    log: ProcessedLog,
    work: @escaping @Sendable (KafkaConsumerMessage) async -> Void = { _ in },
    afterStore: @escaping @Sendable () async -> Void = {}
) async throws {
    for try await message in consumer.messages {
        await work(message)
        switch Result(catching: { () throws(KafkaError) in try consumer.storeOffset(for: message) }) {
        case .success:
            if let id = message.id { log.record(id, by: name) }
        case .failure(let error):
            // notAssigned: the partition moved on; the new owner processes the message again.
            if error.code != .notAssigned { throw error }
        }
        await afterStore()
    }
}

@Suite("Consumer groups", .timeLimit(.minutes(2)))
struct ConsumerGroupTests {
    @Test("two members split the partitions; when one leaves the other takes over and nothing is lost")
    func splitAndTakeOver() async throws {
        try await withCluster { cluster in
            let topic = TestSupport.unique("calls")
            try cluster.createTopic(topic, partitions: 4)
            let group = TestSupport.unique("workers")
            let configuration = TestSupport.consumerConfiguration(cluster, group: group, topics: [topic])
            let log = ProcessedLog()
            let assignedToA = LockedSet()
            let a = try KafkaConsumer(
                configuration: configuration,
                rebalanceHandler: KafkaRebalanceHandler(onAssign: { partitions in
                    assignedToA.insert(partitions.map(\.partition))
                }),
                logger: TestSupport.logger
            )
            let b = try KafkaConsumer(configuration: configuration, logger: TestSupport.logger)

            try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    tasks.addTask { try await process(a, name: "a", log: log) }
                    tasks.addTask { try await process(b, name: "b", log: log) }

                    // Phase 1: both members consume.
                    let first = (0..<400).map { KafkaProducerRecord.numbered(topic: topic, $0, key: "k\($0)") }
                    _ = try await producer.send(first).map { try $0.get() }
                    try await withTimeout("both members consuming", seconds: 30) {
                        await log.wait { $0.isSuperset(of: Set(0..<400)) }
                    }
                    #expect(!log.ids(of: "a").isEmpty && !log.ids(of: "b").isEmpty, "the group split the partitions")

                    // Phase 2: b leaves; a takes over b's partitions.
                    await b.shutdown()
                    let second = (400..<800).map { KafkaProducerRecord.numbered(topic: topic, $0, key: "k\($0)") }
                    _ = try await producer.send(second).map { try $0.get() }
                    try await withTimeout("a taking over", seconds: 30) {
                        await log.wait { $0.isSuperset(of: Set(0..<800)) }
                    }
                    #expect(log.ids(of: "a").isSuperset(of: Set(400..<800)), "a processed everything after b left")
                    #expect(assignedToA.values == [0, 1, 2, 3])
                    await a.shutdown()
                    try await tasks.waitForAll()
                }
            }
            #expect(log.ids == Set(0..<800), "every message processed at least once")
        }
    }

    @Test("in-flight work of a revoked partition finishes and is stored before the partition moves")
    func revokeWaitsForInFlightWork() async throws {
        try await withCluster { cluster in
            let topic = TestSupport.unique("slow")
            try cluster.createTopic(topic, partitions: 2)
            let group = TestSupport.unique("workers")
            let configuration = TestSupport.consumerConfiguration(cluster, group: group, topics: [topic])
            let log = ProcessedLog()
            let inFlight = InFlightTracker()

            // A processes slowly and, on revoke, waits for its in-flight message to finish.
            let a = try KafkaConsumer(
                configuration: configuration,
                rebalanceHandler: KafkaRebalanceHandler(onRevoke: { _ in await inFlight.waitUntilIdle() }),
                logger: TestSupport.logger
            )
            try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
                let records = (0..<60).map { KafkaProducerRecord.numbered(topic: topic, $0, key: "k\($0)") }
                _ = try await producer.send(records).map { try $0.get() }
            }
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask {
                    try await process(a, name: "a", log: log) { _ in
                        await inFlight.begin()
                        try? await Task.sleep(for: .milliseconds(100))  // slow work
                    } afterStore: {
                        await inFlight.end()
                    }
                }
                // Let A finish some messages, then B joins and takes a partition away from A.
                try await withTimeout("a working", seconds: 30) {
                    await log.wait { $0.count >= 5 }
                }
                let b = try KafkaConsumer(configuration: configuration, logger: TestSupport.logger)
                tasks.addTask { try await process(b, name: "b", log: log) }
                try await withTimeout("all processed", seconds: 60) {
                    await log.wait { $0.count == 60 }
                }
                await a.shutdown()
                await b.shutdown()
                try await tasks.waitForAll()
            }
            let finishedByA = log.ids(of: "a")
            let receivedByB = log.ids(of: "b")
            #expect(!receivedByB.isEmpty, "B got a partition")
            #expect(finishedByA.isDisjoint(with: receivedByB), "B was not handed work A had finished")
            #expect(log.ids == Set(0..<60))
        }
    }
}

/// Tracks whether a message is being processed, so the revoke handler can wait for it.
actor InFlightTracker {
    private var active = 0
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []

    func begin() { active += 1 }

    func end() {
        active -= 1
        if active == 0 {
            for waiter in idleWaiters { waiter.resume() }
            idleWaiters = []
        }
    }

    func waitUntilIdle() async {
        if active == 0 { return }
        await withCheckedContinuation { idleWaiters.append($0) }
    }
}

/// A set shared between tasks.
final class LockedSet: Sendable {
    private let state = Mutex<Set<Int32>>([])
    func insert(_ values: [Int32]) { state.withLock { $0.formUnion(values) } }
    var values: Set<Int32> { state.withLock { $0 } }
}
