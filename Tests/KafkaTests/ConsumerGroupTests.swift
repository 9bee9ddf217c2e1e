import CallpushTestSupport
import Locking
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
    private let state = Locked(State())

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

@Suite("Consumer groups", .timeLimit(TestSupport.suiteTimeLimit))
struct ConsumerGroupTests {
    @Test("two members split the partitions; when one leaves the other takes over and nothing is lost")
    func splitAndTakeOver() async throws {
        try await withTopic("calls", partitions: 4) { cluster, topic in
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
                    try await producer.sendAll(KafkaProducerRecord.keyed(topic: topic, 0..<400))
                    try await withTimeout("both members consuming", seconds: 30) {
                        await log.wait { $0.isSuperset(of: Set(0..<400)) }
                    }
                    #expect(!log.ids(of: "a").isEmpty && !log.ids(of: "b").isEmpty, "the group split the partitions")

                    // Phase 2: b leaves; a takes over b's partitions.
                    await b.shutdown()
                    try await producer.sendAll(KafkaProducerRecord.keyed(topic: topic, 400..<800))
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

    @Test("a member joining: the revoked member's in-flight work finishes and is stored before the partition moves")
    func revokeOnJoinWaitsForInFlightWork() async throws {
        try await withTopic("slow", partitions: 2) { cluster, topic in
            let configuration = TestSupport.consumerConfiguration(cluster, group: TestSupport.unique("workers"), topics: [topic])
            let log = ProcessedLog()
            let inFlight = InFlightTracker()
            let gate = Gate()
            let inFlightAtRevoke = LockedSet()

            // A's revoke handler lets the blocked in-flight message finish, then waits for its store.
            let a = try KafkaConsumer(
                configuration: configuration,
                rebalanceHandler: inFlight.revokeHandler(recordingInto: inFlightAtRevoke, first: { await gate.open() }),
                logger: TestSupport.logger
            )
            try await produce(KafkaProducerRecord.keyed(topic: topic, 0..<60), on: cluster)
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask {
                    try await process(a, name: "a", log: log, tracking: inFlight) { _ in
                        await gate.pass()
                        try? await Task.sleep(for: .milliseconds(20))  // slow work
                    }
                }
                try await withTimeout("a working", seconds: 30) {
                    await log.wait { $0.count >= 5 }
                }
                // Hold A's next message in flight; let auto-commit (200 ms) commit what A finished.
                await gate.close()
                try await Task.sleep(for: .milliseconds(800))
                let finishedBeforeJoin = log.ids(of: "a")

                let b = try KafkaConsumer(configuration: configuration, logger: TestSupport.logger)
                tasks.addTask { try await process(b, name: "b", log: log) }
                try await withTimeout("all processed", seconds: 60) {
                    await log.wait { $0.count == 60 }
                }
                await a.shutdown()
                await b.shutdown()
                try await tasks.waitForAll()

                let receivedByB = log.ids(of: "b")
                #expect(!receivedByB.isEmpty, "B got a partition")
                #expect(finishedBeforeJoin.isDisjoint(with: receivedByB), "B was not handed work A had finished")
                // The message in flight when the revoke began finished and was stored by A: the layer
                // kept the partition assigned until the handler returned.
                let held = inFlightAtRevoke.values.map(Int.init)
                #expect(!held.isEmpty, "a message was in flight at revoke")
                #expect(Set(held).isSubset(of: log.ids(of: "a")), "in-flight work was stored before unassign")
                #expect(log.ids == Set(0..<60))
                // Note: librdkafka's mock cluster rejects OffsetCommit while a rebalance is in progress
                // (real Kafka accepts it), so on the mock the in-flight message's offset can be committed
                // only later and B may process it again; on Kafka the revoke-time commit covers it.
            }
        }
    }

    @Test("a member leaving: its in-flight work finishes and is committed; the other member gets no finished work")
    func revokeOnLeaveHandsOverCleanly() async throws {
        try await withTopic("handover", partitions: 2) { cluster, topic in
            let configuration = TestSupport.consumerConfiguration(cluster, group: TestSupport.unique("workers"), topics: [topic])
            let log = ProcessedLog()
            let inFlight = InFlightTracker()
            let revokedWhileBusy = LockedSet()
            let a = try KafkaConsumer(
                configuration: configuration, rebalanceHandler: inFlight.revokeHandler(recordingInto: revokedWhileBusy), logger: TestSupport.logger)
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask {
                    try await process(a, name: "a", log: log, tracking: inFlight) { _ in
                        try? await Task.sleep(for: .milliseconds(150))  // slow work
                    }
                }
                try await produce(KafkaProducerRecord.keyed(topic: topic, 0..<40), on: cluster)
                try await withTimeout("a working", seconds: 30) {
                    await log.wait { $0.count >= 5 }
                }
                // A leaves while busy (its revoke runs while the group is stable, so the commit lands).
                await a.shutdown()
                let finishedByA = log.ids(of: "a")
                let b = try KafkaConsumer(configuration: configuration, logger: TestSupport.logger)
                tasks.addTask { try await process(b, name: "b", log: log) }
                try await withTimeout("b finishing the rest", seconds: 40) {
                    await log.wait { $0.count == 40 }
                }
                await b.shutdown()
                try await tasks.waitForAll()

                // Whether a message is still in flight when the revoke runs depends on timing; if one is,
                // it must have finished and been stored.
                #expect(Set(revokedWhileBusy.values.map(Int.init)).isSubset(of: finishedByA), "in-flight work finished and was stored")
                #expect(finishedByA.isDisjoint(with: log.ids(of: "b")), "B got no message A had finished")
                #expect(log.ids == Set(0..<40))
            }
        }
    }
}

/// Blocks work while closed.
actor Gate {
    private var isOpen = true
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func close() { isOpen = false }

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters = []
    }

    func pass() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }
}

/// Tracks whether a message is being processed, so the revoke handler can wait for it.
actor InFlightTracker {
    private var active: [Int] = []
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []

    var currentIDs: [Int] { active }

    func begin(_ id: Int) { active.append(id) }

    func end() {
        if !active.isEmpty { active.removeFirst() }
        if active.isEmpty {
            for waiter in idleWaiters { waiter.resume() }
            idleWaiters = []
        }
    }

    func waitUntilIdle() async {
        if active.isEmpty { return }
        await withCheckedContinuation { idleWaiters.append($0) }
    }

    /// A revoke handler that records the ids in flight into `held`, runs `first`, then waits
    /// until that work is finished and stored.
    nonisolated func revokeHandler(recordingInto held: LockedSet, first: @escaping @Sendable () async -> Void = {}) -> KafkaRebalanceHandler {
        KafkaRebalanceHandler(onRevoke: { _ in
            held.insert(await self.currentIDs.map(Int32.init))
            await first()
            await self.waitUntilIdle()
        })
    }
}

/// ``process(_:name:log:work:afterStore:)`` with each message counted in flight by `inFlight`
/// from before `work` until after its offset is stored.
func process(
    _ consumer: KafkaConsumer,
    name: String,
    log: ProcessedLog,
    tracking inFlight: InFlightTracker,
    work: @escaping @Sendable (KafkaConsumerMessage) async -> Void
) async throws {
    try await process(consumer, name: name, log: log) { message in
        await inFlight.begin(message.id ?? -1)
        await work(message)
    } afterStore: {
        await inFlight.end()
    }
}

/// A set shared between tasks.
final class LockedSet: Sendable {
    private let state = Locked<Set<Int32>>([])
    func insert(_ values: [Int32]) { state.withLock { $0.formUnion(values) } }
    var values: Set<Int32> { state.withLock { $0 } }
}
