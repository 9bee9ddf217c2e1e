import CallContract
import Foundation
import Logging
import Locking

/// One delivery's place in its partition's assignment (`DeliveryRun.tickets`).
public struct DeliveryTicket: Sendable, Hashable {
    public var partition: Int32
    public var offset: Int64
    /// Which assignment of the partition the delivery belongs to.
    var generation: Int
}

/// The worker's view of its partitions: which it owns, what is in flight in each, and which
/// offset each may store. It implements the rebalance contract:
/// - on assign, the dedupe state and cancel memory of each new partition are rebuilt from the
///   status topic before its first message is begun (a message that arrives earlier waits);
/// - on revoke, deliveries of the revoked partitions that have not begun work hand back at once,
///   those in flight get `drainTimeout` to finish and store their offsets, and the rest are
///   cancelled and waited for at most `leftoverBound` (a cancelled delivery whose push went out
///   still writes its outcome, bounded) — so a revoke ends within its bound;
/// - a partition whose unfinished offsets pile up behind a delivery that does not finish is
///   paused (`pauseAfter` begun-but-not-stored offsets), so the offset tracker stays bounded.
///
/// Offsets are stored under the lock, right when a delivery's outcome is durable, so a drained
/// partition's offsets are stored before the Kafka layer commits and unassigns it.
public final class PartitionCoordinator: Sendable {
    private struct Partition {
        var tracker = OffsetTracker()
        /// Each begun offset's task, shared by the deliveries of its run (`start(run:)`).
        var inFlight: [Int64: any DeliveryHandle] = [:]
        /// Offsets whose task has not begun work (waits for an in-flight slot).
        var waiting: Set<Int64> = []
        /// Highest offset begun in this assignment.
        var lastBegun: Int64?
        /// Which assignment of the partition this is. A delivery of an earlier assignment that
        /// ends late (it was cancelled by a revoke and handed back) must not touch this one.
        var generation: Int
        /// Paused because too many offsets are begun and not stored.
        var paused = false
        /// Being revoked: no new delivery begins.
        var revoking = false
    }

    private struct State {
        var partitions: [Int32: Partition] = [:]
        /// Partitions whose `assigned` is running, with its token.
        var assigning: [Int32: Int] = [:]
        /// Messages waiting for a partition's `assigned` to finish.
        var settled: [Int32: [CheckedContinuation<Void, Never>]] = [:]
        var generations = 0
    }

    private let state = Locked(State())
    private let dedupe: PartitionDedupe
    private let cancels: CancelSignals?
    private let cancelMemory: Duration
    private let history: (any StatusHistoryRebuilding)?
    private let drainTimeout: Duration
    /// How long cancelled leftovers of a revoke are waited for.
    private let leftoverBound: Duration
    private let pauseAfter: Int
    private let health: WorkerHealth?
    private let metrics: WorkerMetrics?
    private let logger: Logger
    /// Stores a partition's next offset to commit (the consumer's offset store).
    private let storeOffset: @Sendable (Int32, Int64) throws -> Void
    /// Pauses (true) or resumes (false) fetching a partition.
    private let pause: @Sendable (Int32, Bool) -> Void
    /// Where runs' tasks run: a partition's on `executors[partition % count]`; none: the global executor.
    private let executors: [any TaskExecutor]

    /// - Parameters:
    ///   - storeOffset: stores a partition's next offset to commit; called under the coordinator's lock,
    ///     right when a delivery's outcome is durable.
    ///   - pause: pauses (true) or resumes (false) fetching a partition; called outside the lock.
    ///   - executors: the task executors runs prefer, a partition's always the same one
    ///     (``PushWorkerService``'s `executors`); empty: Swift's global executor.
    public init(dedupe: PartitionDedupe, history: (any StatusHistoryRebuilding)?, drainTimeout: Duration,
                storeOffset: @escaping @Sendable (Int32, Int64) throws -> Void, pause: @escaping @Sendable (Int32, Bool) -> Void,
                leftoverBound: Duration = .seconds(20), cancels: CancelSignals? = nil, cancelMemory: Duration = .seconds(600),
                pauseAfter: Int = 20_000, health: WorkerHealth? = nil, metrics: WorkerMetrics? = nil,
                executors: [any TaskExecutor] = [], logger: Logger) {
        self.storeOffset = storeOffset
        self.executors = executors
        self.pause = pause
        self.dedupe = dedupe
        self.history = history
        self.drainTimeout = drainTimeout
        self.leftoverBound = leftoverBound
        self.cancels = cancels
        self.cancelMemory = cancelMemory
        self.pauseAfter = max(1, pauseAfter)
        self.health = health
        self.metrics = metrics
        self.logger = logger
    }

    /// The executor a partition's runs prefer (nil: the global one).
    func executor(for partition: Int32) -> (any TaskExecutor)? {
        executors.isEmpty ? nil : executors[Int(partition.magnitude) % executors.count]
    }

    /// Partitions owned now.
    public var owned: [Int32] { state.withLock { $0.partitions.keys.sorted() } }

    /// Deliveries at work across partitions (not counting those waiting for an in-flight slot).
    public var inFlightCount: Int { state.withLock { $0.partitions.values.reduce(0) { $0 + $1.inFlight.count - $1.waiting.count } } }

    /// For each owned partition, the first offset not yet finished (nil until a message was seen):
    /// the consumer lag is the partition's high watermark minus this.
    public var positions: [Int32: Int64?] {
        state.withLock { state in
            state.partitions.mapValues { partition in
                partition.tracker.lowestUnfinished ?? partition.lastBegun.map { $0 + 1 }
            }
        }
    }

    /// For each owned partition with unfinished messages, how long its lowest one has been unfinished.
    public func oldestUnfinished(now: ContinuousClock.Instant = .now) -> [Int32: Duration] {
        state.withLock { state in
            state.partitions.compactMapValues { $0.tracker.oldestBegan.map { now - $0 } }
        }
    }

    /// Each partition's state in one line, for a test's failure message or a debugging session:
    /// assignment generation, next offset to store, lowest unfinished and last begun offset,
    /// begun-but-unfinished offsets, tasks in flight and waiting for slots, paused, revoking; and
    /// the partitions whose assignment is being set up, with the messages waiting for it.
    package var stateSummary: String {
        state.withLock { state in
            let partitions = state.partitions.sorted { $0.key < $1.key }.map { id, p in
                "\(id):gen=\(p.generation) stored=\(p.tracker.committable.map(String.init) ?? "-") "
                    + "lowest=\(p.tracker.lowestUnfinished.map(String.init) ?? "-") lastBegun=\(p.lastBegun.map(String.init) ?? "-") "
                    + "unfinished=\(p.tracker.inFlight) inFlight=\(p.inFlight.count) waiting=\(p.waiting.count)"
                    + (p.paused ? " paused" : "") + (p.revoking ? " revoking" : "")
            }
            let assigning = state.assigning.keys.sorted().map { "\($0)(waiting messages: \(state.settled[$0]?.count ?? 0))" }
            return "partitions=[\(partitions.joined(separator: "; "))] assigning=[\(assigning.joined(separator: ","))]"
        }
    }

    // MARK: Rebalance

    /// New partitions: rebuild their dedupe state and cancel memory from the status topic, then
    /// accept their messages. A revoke of a partition while this runs voids its assignment here.
    public func assigned(_ partitions: [Int32]) async {
        let token = state.withLock { state in
            state.generations += 1
            for partition in partitions { state.assigning[partition] = state.generations }
            return state.generations
        }
        var stores = Dictionary(uniqueKeysWithValues: partitions.map { ($0, dedupe.makeStore()) })
        var coverage: [Int32: StatusHistoryCoverage] = [:]
        if let history {
            let cancels = self.cancels
            let cancelMemory = cancelMemory
            coverage = await history.rebuild(
                partitions: partitions, now: Date(),
                handled: { partition, key, until in stores[partition]?.remember(key, until: until) },
                cancelled: { _, scope, at in cancels?.cancel(callId: scope, forgetAfter: at.addingTimeInterval(cancelMemory.inSeconds)) })
        }
        let (installed, waiters) = state.withLock { state -> ([Int32], [CheckedContinuation<Void, Never>]) in
            var installed: [Int32] = []
            var waiters: [CheckedContinuation<Void, Never>] = []
            for partition in partitions where state.assigning[partition] == token {
                state.assigning[partition] = nil
                dedupe.install(stores[partition] ?? dedupe.makeStore(), partition: partition)
                state.generations += 1
                state.partitions[partition] = Partition(generation: state.generations)
                installed.append(partition)
                waiters += state.settled.removeValue(forKey: partition) ?? []
            }
            return (installed, waiters)
        }
        for waiter in waiters { waiter.resume() }
        recordCoverage(coverage, of: installed)
        logger.info("partitions assigned", metadata: ["kafka.partitions": "\(installed.sorted())"])
    }

    private func recordCoverage(_ coverage: [Int32: StatusHistoryCoverage], of partitions: [Int32]) {
        let now = Date()
        for partition in partitions {
            let result = coverage[partition] ?? .complete
            if history != nil {
                let name = switch result { case .complete: "complete"; case .partial: "partial"; case .failed: "failed" }
                metrics?.rebuild(result: name)
            }
            switch result {
            case .complete:
                health?.setDedupeCoverage(partition: partition, incompleteUntil: nil)
            case .partial(let reachedBack):
                // The statuses not read are older than `reachedBack`: they matter while a delivery they
                // record could be redelivered, i.e. within the dedupe window from now.
                let until = (reachedBack ?? now).addingTimeInterval(cancelMemory.inSeconds)
                health?.setDedupeCoverage(partition: partition, incompleteUntil: until)
                logger.error("dedupe rebuilt only in part: deliveries handled before the statuses read may be pushed again",
                             metadata: ["kafka.partition": "\(partition)",
                                        "reached_back": "\(reachedBack.map(ContractCoding.format) ?? "-")"])
            case .failed(let reason):
                health?.setDedupeCoverage(partition: partition, incompleteUntil: now.addingTimeInterval(cancelMemory.inSeconds))
                logger.error("dedupe rebuild failed: deliveries handled before may be pushed again",
                             metadata: ["kafka.partition": "\(partition)", "error": "\(reason)"])
            }
        }
    }

    /// Partitions moving away: stop accepting their messages, hand back what has not begun, let
    /// in-flight work finish within the bound, cancel the rest, and forget them.
    ///
    /// When the Kafka layer stops waiting for this (its revoke bound) and the partition is
    /// assigned again before this returns, the end of this leaves the new assignment alone.
    public func revoked(_ partitions: [Int32]) async {
        let (handles, generations, waiters) = state.withLock {
            state -> ([any DeliveryHandle], [Int32: Int], [CheckedContinuation<Void, Never>]) in
            var handles: [any DeliveryHandle] = []
            var generations: [Int32: Int] = [:]
            var waiters: [CheckedContinuation<Void, Never>] = []
            for partition in partitions {
                // An assignment still being set up is void; messages waiting for it are stale now.
                state.assigning[partition] = nil
                waiters += state.settled.removeValue(forKey: partition) ?? []
                guard let owned = state.partitions[partition] else { continue }
                state.partitions[partition]!.revoking = true
                generations[partition] = owned.generation
                // A run's deliveries wait, or have begun, together: cancelling a waiting one's
                // shared task hands back only deliveries that had not begun.
                for (offset, task) in owned.inFlight where owned.waiting.contains(offset) { task.cancel() }
                handles += Self.distinct(owned.inFlight.values)
            }
            return (handles, generations, waiters)
        }
        for waiter in waiters { waiter.resume() }
        let drained = await Self.awaitAll(handles, within: drainTimeout)
        if !drained {
            logger.warning("revoked partitions did not drain in time; handing back unfinished deliveries",
                           metadata: ["kafka.partitions": "\(partitions.sorted())"])
            for handle in handles { handle.cancel() }
            if await !Self.awaitAll(handles, within: leftoverBound) {
                logger.error("deliveries of revoked partitions still running after the bound; their outcomes may be written late",
                             metadata: ["kafka.partitions": "\(partitions.sorted())"])
            }
        }
        let resumed = state.withLock { state -> [Int32] in
            let ended = partitions.filter { state.partitions[$0] != nil && state.partitions[$0]?.generation == generations[$0] }
            let resumed = ended.filter { state.partitions[$0]?.paused == true }
            for partition in ended { state.partitions[partition] = nil }
            dedupe.remove(partitions: ended)
            health?.retain(partitions: Set(state.partitions.keys))
            return resumed
        }
        if !resumed.isEmpty {
            for partition in resumed { pause(partition, false) }  // librdkafka keeps a pause across re-assignment
        }
        logger.info("partitions revoked", metadata: ["kafka.partitions": "\(partitions.sorted())", "drained": "\(drained)"])
    }

    /// Waits for every in-flight delivery (graceful shutdown), cancelling what is left after the
    /// bound and waiting for that at most `leftoverBound`.
    public func drainAll() async -> Bool {
        let handles = state.withLock { state in state.partitions.values.flatMap { Self.distinct($0.inFlight.values) } }
        if await Self.awaitAll(handles, within: drainTimeout) { return true }
        for handle in handles { handle.cancel() }
        _ = await Self.awaitAll(handles, within: leftoverBound)
        return false
    }

    /// Cancels every in-flight delivery without waiting (they hand back; offsets stay unstored).
    public func abandonAll() {
        let handles = state.withLock { state in state.partitions.values.flatMap { Self.distinct($0.inFlight.values) } }
        for handle in handles { handle.cancel() }
    }

    /// Each task once (a run's offsets share theirs).
    private static func distinct(_ handles: some Sequence<any DeliveryHandle>) -> [any DeliveryHandle] {
        var seen: Set<AnyHashable> = []
        return handles.filter { seen.insert($0.identity).inserted }
    }

    /// Whether all `handles` ended within `bound` (they are not cancelled here).
    private static func awaitAll(_ handles: [any DeliveryHandle], within bound: Duration) async -> Bool {
        guard !handles.isEmpty else { return true }
        let once = OnceBox()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            once.set(continuation)
            let waiter = Task {
                for handle in handles { await handle.wait() }
                once.resume(true)
            }
            Task {
                try? await Task.sleep(for: bound)
                once.resume(false)  // `waiter` ends with the handles, which are bounded themselves
                _ = waiter
            }
        }
    }

    // MARK: Deliveries

    /// Waits until `partition`'s assignment is set up (`start(run:)` answered `.waitForAssignment`).
    public func assignmentSettled(_ partition: Int32) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let pending = state.withLock { state -> Bool in
                guard state.assigning[partition] != nil else { return false }
                state.settled[partition, default: []].append(continuation)
                return true
            }
            if !pending { continuation.resume() }
        }
    }

    /// What `start(run:)` did with a run of messages.
    public enum RunStart {
        /// The deliveries of these messages (indices into the run, in order) run in one task; the
        /// others were stale.
        case started([Int])
        /// None begun: every message belongs to an earlier assignment, or was already begun.
        case stale
        /// Their partition's assignment is still being set up: wait (`assignmentSettled`) and start again.
        case waitForAssignment
    }

    /// Begins a run of messages of ONE partition, in offset order, and runs `work` for all of them
    /// in one task. Each delivery keeps its own ticket: its offset is stored when its own outcome is
    /// durable (`DeliveryRun.finish`), whatever the others do. The run counts as waiting until the
    /// work calls `beginWork(_:)` (it may first wait for in-flight slots): a revoke hands every
    /// delivery of a waiting run back at once, and a begun run gets the drain bound, then is
    /// cancelled. A message that is stale (`isCurrent(index)` false, or already begun) is left out;
    /// the rest still run.
    ///
    /// `isCurrent` is asked under the coordinator's lock, after the caller may have waited across a
    /// revoke and a new assignment of the same partition. Such a stale message must not be begun:
    /// the new assignment re-delivers from the committed offset, and begun first, the stale offset
    /// would make the tracker skip the earlier re-delivered ones and then store past them (lost calls).
    public func start(
        run events: [InboundEvent],
        isCurrent: (Int) -> Bool = { _ in true },
        _ work: @escaping @Sendable (DeliveryRun) async -> Void
    ) -> RunStart {
        guard let partitionID = events.first?.partition else { return .stale }
        let (start, pauseNow) = state.withLock { state -> (RunStart, Bool) in
            if state.assigning[partitionID] != nil { return (.waitForAssignment, false) }
            // Taken out while the run's offsets are begun (one lookup, not several per event; its
            // tables are not copied) and put back before the lock is let go.
            guard var partition = state.partitions.removeValue(forKey: partitionID) else { return (.stale, false) }
            defer { state.partitions[partitionID] = partition }
            guard !partition.revoking else { return (.stale, false) }
            var begun: [Int] = []
            var tickets: [DeliveryTicket] = []
            begun.reserveCapacity(events.count)
            tickets.reserveCapacity(events.count)
            for (index, event) in events.enumerated() {
                precondition(event.partition == partitionID, "a run holds one partition's messages")
                guard isCurrent(index), partition.tracker.begin(event.offset) else { continue }
                begun.append(index)
                tickets.append(DeliveryTicket(partition: partitionID, offset: event.offset, generation: partition.generation))
            }
            guard let last = tickets.last else { return (.stale, false) }
            partition.lastBegun = last.offset
            let run = DeliveryRun(tickets: tickets, indices: begun, coordinator: self)
            let task = Task(executorPreference: executor(for: partitionID)) {
                await work(run)
                run.handBackUnfinished()
            }
            for ticket in tickets {
                partition.inFlight[ticket.offset] = task
                partition.waiting.insert(ticket.offset)
            }
            var pauseNow = false
            if !partition.paused, partition.tracker.inFlight >= pauseAfter {
                partition.paused = true
                pauseNow = true
            }
            return (.started(begun), pauseNow)
        }
        if pauseNow {
            logger.warning("partition paused: too many offsets waiting behind an unfinished delivery",
                           metadata: ["kafka.partition": "\(partitionID)", "kafka.offset": "\(events.last?.offset ?? -1)"])
            pause(partitionID, true)
        }
        return start
    }

    /// The run begins its work (it has its in-flight slots). False when its partition was revoked
    /// meanwhile: hand back.
    public func beginWork(_ run: DeliveryRun) -> Bool {
        guard let first = run.tickets.first else { return false }
        return state.withLock { state in
            guard var partition = state.partitions.removeValue(forKey: first.partition) else { return false }
            defer { state.partitions[first.partition] = partition }
            guard partition.generation == first.generation else { return false }
            for ticket in run.tickets { partition.waiting.remove(ticket.offset) }
            return true
        }
    }

    /// Ends deliveries of one partition's assignment (a run's that ended together): one lock, and
    /// the offset stored once, as far as the finished prefix now reaches.
    fileprivate func complete(_ ended: some Collection<(DeliveryTicket, DeliveryResult)>) {
        guard let (first, _) = ended.first else { return }
        let partition = first.partition
        let resume = state.withLock { state -> Bool in
            // Taken out (one lookup, its tables not copied) and put back before the lock is let go.
            guard var entry = state.partitions.removeValue(forKey: partition) else { return false }
            defer { state.partitions[partition] = entry }
            guard entry.generation == first.generation else { return false }
            var next: Int64?
            for (ticket, result) in ended {
                entry.inFlight[ticket.offset] = nil
                entry.waiting.remove(ticket.offset)
                if case .finished = result, let advanced = entry.tracker.finish(ticket.offset) {
                    next = advanced
                }
            }
            if let next {
                do {
                    try storeOffset(partition, next)
                } catch {
                    logger.warning("could not store offset", metadata: [
                        "kafka.partition": "\(partition)", "kafka.offset": "\(next)", "error": "\(error)",
                    ])
                }
            }
            guard entry.paused, entry.tracker.inFlight <= pauseAfter / 2 else { return false }
            entry.paused = false
            return true
        }
        if resume { pause(partition, false) }
    }
}

/// The deliveries of a run (`PartitionCoordinator.start(run:)`): one ticket each, finished one by one.
public final class DeliveryRun: Sendable {
    /// The begun deliveries, in offset order.
    public let tickets: [DeliveryTicket]
    /// Where each begun delivery's message is in the run `start(run:)` was given.
    public let indices: [Int]
    private let coordinator: PartitionCoordinator
    private let finished: Locked<[Bool]>

    fileprivate init(tickets: [DeliveryTicket], indices: [Int], coordinator: PartitionCoordinator) {
        self.tickets = tickets
        self.indices = indices
        self.coordinator = coordinator
        self.finished = Locked(Array(repeating: false, count: tickets.count))
    }

    /// Delivery `index` ended with `result`: its offset may be stored (when `.finished`), and
    /// its place in the in-flight table is freed. Only the first call per delivery counts: true
    /// for it.
    @discardableResult
    public func finish(_ index: Int, _ result: DeliveryResult) -> Bool {
        !finish(CollectionOfOne((index, result))).isEmpty
    }

    /// Deliveries that ended together (each as `finish(_:_:)`); returns the indices that counted.
    @discardableResult
    public func finish(_ ended: some Collection<(Int, DeliveryResult)>) -> [Int] {
        let counted = finished.withLock { finished in
            ended.filter { index, _ in
                guard !finished[index] else { return false }
                finished[index] = true
                return true
            }
        }
        if !counted.isEmpty { coordinator.complete(counted.map { (tickets[$0.0], $0.1) }) }
        return counted.map(\.0)
    }

    /// Deliveries the work did not finish are handed back (their offsets stay unstored).
    fileprivate func handBackUnfinished() {
        finish(tickets.indices.map { ($0, DeliveryResult.handedBack) })
    }
}

/// A task running a run of deliveries, as the coordinator waits for and cancels it.
protocol DeliveryHandle: Sendable {
    func cancel()
    func wait() async
    /// Equal for the same task.
    var identity: AnyHashable { get }
}

extension Task: DeliveryHandle where Failure == Never {
    func wait() async { _ = await value }
    var identity: AnyHashable { AnyHashable(self) }
}

/// Reads what the status history says about newly assigned partitions (`StatusHistoryReader`).
public protocol StatusHistoryRebuilding: Sendable {
    /// `handled` gets each delivery in a handled state and until when to remember it; `cancelled`
    /// each call-level cancel marker (partition, cancel scope — tenant and call id —, when).
    func rebuild(partitions: [Int32], now: Date, handled: (Int32, DeliveryKey, Date) -> Void,
                 cancelled: (Int32, String, Date) -> Void) async -> [Int32: StatusHistoryCoverage]
}

extension StatusHistoryReader: StatusHistoryRebuilding {}

/// Resumes a continuation once, from whichever side comes first.
private final class OnceBox: Sendable {
    private let state = Locked<(continuation: CheckedContinuation<Bool, Never>?, value: Bool?)>((nil, nil))

    func set(_ continuation: CheckedContinuation<Bool, Never>) {
        let early = state.withLock { state -> Bool? in
            if let value = state.value { return value }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    func resume(_ value: Bool) {
        let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: value)
    }
}
