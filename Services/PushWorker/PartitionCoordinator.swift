import Foundation
import Logging
import Locking

/// The worker's view of its partitions: which it owns, what is in flight in each, and which
/// offset each may store. It implements the rebalance contract:
/// - on assign, the dedupe state of each new partition is rebuilt before its first message;
/// - on revoke, in-flight deliveries of the revoked partitions get `drainTimeout` to finish and
///   store their offsets; the rest are cancelled (handed back: the next owner redoes them).
///
/// Offsets are stored under the lock, right when a delivery's outcome is durable, so a drained
/// partition's offsets are stored before the Kafka layer commits and unassigns it.
public final class PartitionCoordinator: Sendable {
    private struct Partition {
        var tracker = OffsetTracker()
        var inFlight: [Int64: Task<DeliveryResult, Never>] = [:]
        /// Highest offset begun in this assignment.
        var lastBegun: Int64?
        /// Which assignment of the partition this is. A delivery of an earlier assignment that
        /// ends late (it was cancelled by a revoke and handed back) must not touch this one.
        var generation = 0
    }

    private struct State {
        var partitions: [Int32: Partition] = [:]
        var revoked: Set<Int32> = []
        var storeOffset: (@Sendable (Int32, Int64) throws -> Void)?
        var generations = 0
    }

    private let state = Locked(State())
    private let dedupe: PartitionDedupe
    private let history: StatusHistoryReader?
    private let drainTimeout: Duration
    private let logger: Logger

    public init(dedupe: PartitionDedupe, history: StatusHistoryReader?, drainTimeout: Duration, logger: Logger) {
        self.dedupe = dedupe
        self.history = history
        self.drainTimeout = drainTimeout
        self.logger = logger
    }

    /// Sets how offsets are stored (the consumer, created after the coordinator).
    public func setOffsetStore(_ store: @escaping @Sendable (Int32, Int64) throws -> Void) {
        state.withLock { $0.storeOffset = store }
    }

    /// Partitions owned now.
    public var owned: [Int32] { state.withLock { $0.partitions.keys.sorted() } }

    /// Deliveries in flight across partitions.
    public var inFlightCount: Int { state.withLock { $0.partitions.values.reduce(0) { $0 + $1.inFlight.count } } }

    /// For each owned partition, the first offset not yet finished (nil until a message was seen):
    /// the consumer lag is the partition's high watermark minus this.
    public var positions: [Int32: Int64?] {
        state.withLock { state in
            state.partitions.mapValues { partition in
                partition.tracker.lowestUnfinished ?? partition.lastBegun.map { $0 + 1 }
            }
        }
    }

    // MARK: Rebalance

    /// New partitions: rebuild their dedupe state from the status topic, then accept their messages.
    public func assigned(_ partitions: [Int32]) async {
        let stores = await history?.rebuild(partitions: partitions, makeStore: dedupe.makeStore) ?? [:]
        state.withLock { state in
            for partition in partitions {
                dedupe.install(stores[partition] ?? dedupe.makeStore(), partition: partition)
                state.revoked.remove(partition)
                state.generations += 1
                state.partitions[partition] = Partition(generation: state.generations)
            }
        }
        logger.info("partitions assigned", metadata: ["kafka.partitions": "\(partitions.sorted())"])
    }

    /// Partitions moving away: stop accepting their messages, let in-flight work finish within the
    /// bound, cancel the rest, and forget them.
    ///
    /// When the Kafka layer stops waiting for this (its revoke bound) and the partition is
    /// assigned again before this returns, the end of this leaves the new assignment alone.
    public func revoked(_ partitions: [Int32]) async {
        let (handles, generations) = state.withLock { state -> ([Task<DeliveryResult, Never>], [Int32: Int]) in
            state.revoked.formUnion(partitions)
            let handles = partitions.flatMap { state.partitions[$0]?.inFlight.values.map { $0 } ?? [] }
            return (handles, partitions.reduce(into: [:]) { $0[$1] = state.partitions[$1]?.generation })
        }
        let drained = await Self.awaitAll(handles, within: drainTimeout)
        if !drained {
            logger.warning("revoked partitions did not drain in time; handing back unfinished deliveries",
                           metadata: ["kafka.partitions": "\(partitions.sorted())"])
        }
        state.withLock { state in
            let ended = partitions.filter { state.partitions[$0]?.generation == generations[$0] }
            for partition in ended { state.partitions[partition] = nil }
            dedupe.remove(partitions: ended)
        }
        logger.info("partitions revoked", metadata: ["kafka.partitions": "\(partitions.sorted())", "drained": "\(drained)"])
    }

    /// Waits for every in-flight delivery (graceful shutdown), cancelling what is left after the bound.
    public func drainAll() async -> Bool {
        let handles = state.withLock { state in state.partitions.values.flatMap { $0.inFlight.values.map { $0 } } }
        return await Self.awaitAll(handles, within: drainTimeout)
    }

    /// Cancels every in-flight delivery without waiting (they hand back; offsets stay unstored).
    public func abandonAll() {
        let handles = state.withLock { state in state.partitions.values.flatMap { $0.inFlight.values.map { $0 } } }
        for handle in handles { handle.cancel() }
    }

    /// Waits for `handles`; after `bound` cancels the ones still running and waits for them to hand back.
    private static func awaitAll(_ handles: [Task<DeliveryResult, Never>], within bound: Duration) async -> Bool {
        guard !handles.isEmpty else { return true }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for handle in handles { _ = await handle.value }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: bound)
                return false
            }
            let first = await group.next() ?? true
            if !first { for handle in handles { handle.cancel() } }
            group.cancelAll()
            return first
        }
    }

    // MARK: Deliveries

    /// Starts processing `event` in its own task, or returns nil when its partition is being
    /// revoked (the message will be delivered to the partition's next owner), the offset was
    /// already begun (a re-delivery inside this assignment) or `isCurrent` says the message was
    /// fetched in an earlier assignment of the partition.
    ///
    /// `isCurrent` is asked under the coordinator's lock, after the caller may have waited (for
    /// in-flight room) across a revoke and a new assignment of the same partition. Such a stale
    /// message must not be begun: the new assignment re-delivers from the committed offset, and
    /// begun first, the stale offset would make the tracker skip the earlier re-delivered ones
    /// and then store past them (lost calls).
    public func start(
        _ event: InboundEvent,
        isCurrent: () -> Bool = { true },
        _ work: @escaping @Sendable () async -> DeliveryResult
    ) -> Task<DeliveryResult, Never>? {
        state.withLock { state -> Task<DeliveryResult, Never>? in
            guard !state.revoked.contains(event.partition), isCurrent() else { return nil }
            // Mutated in place (`partitions[p]!.…`): a copy taken out and written back would copy the
            // in-flight table (hundreds of entries) on every event.
            if state.partitions[event.partition] == nil { state.partitions[event.partition] = Partition() }
            guard state.partitions[event.partition]!.tracker.begin(event.offset) else { return nil }
            state.partitions[event.partition]!.lastBegun = event.offset
            let generation = state.partitions[event.partition]!.generation
            let task = Task {
                let result = await work()
                self.complete(event, result, generation: generation)
                return result
            }
            state.partitions[event.partition]!.inFlight[event.offset] = task
            return task
        }
    }

    private func complete(_ event: InboundEvent, _ result: DeliveryResult, generation: Int) {
        state.withLock { state in
            guard state.partitions[event.partition]?.generation == generation else { return }
            state.partitions[event.partition]!.inFlight[event.offset] = nil
            if case .finished = result, let next = state.partitions[event.partition]!.tracker.finish(event.offset) {
                do {
                    try state.storeOffset?(event.partition, next)
                } catch {
                    logger.warning("could not store offset", metadata: [
                        "kafka.partition": "\(event.partition)", "kafka.offset": "\(next)", "error": "\(error)",
                    ])
                }
            }
        }
    }
}
