import Foundation
import Locking
import Logging
import Testing
import CallContract

@testable import PushWorker

/// The coordinator across a revoke and a new assignment of the same partition to the same
/// worker (an eager rebalance), where the partition is re-delivered from its committed offset.
@Suite("Partition coordinator across re-assignment")
struct PartitionCoordinatorTests {
    /// Offsets the coordinator stored, in order.
    final class Stores: Sendable {
        private let values = Locked<[Int64]>([])
        func record(_ offset: Int64) { values.withLock { $0.append(offset) } }
        var all: [Int64] { values.withLock { $0 } }
    }

    /// A gate that ignores task cancellation (like the un-cancelled status write of a delivery).
    final class Gate: Sendable {
        private let state = Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
        func pass() async {
            await withCheckedContinuation { continuation in
                let open = state.withLock { state -> Bool in
                    if !state.open { state.waiters.append(continuation) }
                    return state.open
                }
                if open { continuation.resume() }
            }
        }
        func open() {
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.open = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    private func makeCoordinator(_ stores: Stores) -> PartitionCoordinator {
        let coordinator = PartitionCoordinator(
            dedupe: PartitionDedupe(retention: .seconds(60), capacity: 100), history: nil,
            drainTimeout: .milliseconds(50), storeOffset: { _, offset in stores.record(offset) }, pause: { _, _ in },
            logger: Logger(label: "coordinator-tests"))
        return coordinator
    }

    private func event(_ offset: Int64) -> InboundEvent {
        InboundEvent(partition: 0, offset: offset, key: nil, value: [])
    }

    /// The delivery's task when `startOne` began it.
    private func start(_ coordinator: PartitionCoordinator, _ offset: Int64, isCurrent: () -> Bool = { true },
                       _ work: @escaping @Sendable () async -> DeliveryResult) -> Task<DeliveryResult, Never>? {
        guard case .started(let task) = coordinator.startOne(event(offset), isCurrent: isCurrent, { run in
            guard coordinator.beginWork(run) else { return .handedBack }
            return await work()
        }) else { return nil }
        return task
    }

    /// The Kafka layer waits for the revoke handler only up to its bound; the partition can then
    /// be assigned again while the handler still waits for a delivery that ignores cancellation.
    @Test("a revoke that ends after the partition was assigned again leaves the new assignment's deliveries and offsets alone")
    func lateRevokeAndCompletionOfAnEarlierAssignmentAreIgnored() async throws {
        let stores = Stores()
        let coordinator = makeCoordinator(stores)
        await coordinator.assigned([0])
        let oldGate = Gate()
        let old = try #require(start(coordinator, 5) { await oldGate.pass(); return .finished(.sent) })
        let revoke = Task { await coordinator.revoked([0]) }  // cannot drain: the delivery ignores cancellation
        while start(coordinator, 6, { .finished(.sent) }) != nil { await Task.yield() }  // wait until revoking
        await coordinator.assigned([0])

        // Re-delivered from the committed offset 3.
        let gates = [Gate(), Gate(), Gate()]
        var tasks: [Task<DeliveryResult, Never>] = []
        for (index, offset) in [3, 4, 5].map(Int64.init).enumerated() {
            let gate = gates[index]
            tasks.append(try #require(start(coordinator, offset) { await gate.pass(); return .finished(.sent) }))
        }
        oldGate.open()
        _ = await old.value
        await revoke.value
        #expect(coordinator.owned == [0], "the earlier revoke did not remove the new assignment")
        #expect(coordinator.inFlightCount == 3, "the old delivery's end left the new deliveries tracked")
        #expect(stores.all.isEmpty)

        gates[0].open(); _ = await tasks[0].value
        gates[1].open(); _ = await tasks[1].value
        #expect(stores.all == [4, 5], "5 is still running in this assignment: nothing stored past it")
        gates[2].open(); _ = await tasks[2].value
        #expect(stores.all == [4, 5, 6])
    }

    @Test("a message held across revoke and re-assignment is not begun, so the re-delivered earlier messages are")
    func staleMessageIsNotBegun() async throws {
        let stores = Stores()
        let coordinator = makeCoordinator(stores)
        await coordinator.assigned([0])
        await coordinator.revoked([0])
        await coordinator.assigned([0])

        // The consumer says the held message (offset 5) was fetched in the earlier assignment.
        #expect(start(coordinator, 5, isCurrent: { false }) { .finished(.sent) } == nil)
        // The new assignment re-delivers 3, 4, 5: all begun and finished, offsets stored in order.
        var tasks: [Task<DeliveryResult, Never>] = []
        for offset in [3, 4, 5] as [Int64] {
            tasks.append(try #require(start(coordinator, offset) { .finished(.sent) }, "offset \(offset) begun"))
        }
        for task in tasks { _ = await task.value }
        #expect(stores.all.last == 6)
        #expect(Set(stores.all).isSubset(of: [4, 5, 6]))
    }
}

extension PartitionCoordinator {
    /// What `startOne` did with a message.
    enum OneStart {
        /// Begun: the task ends with the delivery's result once the coordinator has ended it (its
        /// offset stored if it finished).
        case started(Task<DeliveryResult, Never>)
        case stale
        case waitForAssignment
    }

    /// Starts `event` as a run of one (`start(run:)`, the worker's only way to begin deliveries),
    /// for tests about a single delivery. `work` runs in the run's task (a revoke cancels it there)
    /// and calls `beginWork(_:)` itself where the test needs it; its result finishes the delivery.
    func startOne(_ event: InboundEvent, isCurrent: () -> Bool = { true },
                  _ work: @escaping @Sendable (DeliveryRun) async -> DeliveryResult) -> OneStart {
        let ended = OneShot<DeliveryResult>()
        switch start(run: [event], isCurrent: { _ in isCurrent() }, { run in
            let result = await work(run)
            run.finish(0, result)
            ended.set(result)
        }) {
        case .started: return .started(Task { await ended.wait() })
        case .stale: return .stale
        case .waitForAssignment: return .waitForAssignment
        }
    }
}
