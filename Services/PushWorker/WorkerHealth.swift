import Foundation
import Locking

/// Whether the worker is making progress, for `/readyz`, `/healthz` and the metrics: outcome
/// writes that keep failing, deliveries that do not finish, dedupe state rebuilt only in part.
///
/// - Not ready (`/readyz` 503) while: no partition is owned; outcome writes have failed without a
///   success for `writeFailureBound`; the oldest unfinished delivery of a partition is older than
///   `stallBound`; or a partition's dedupe rebuild was partial or failed and the statuses it could
///   not read are still inside the dedupe window.
/// - Not live (`/healthz` 503, the pod is restarted) once writes have failed, or a delivery has
///   been unfinished, for `unhealthyAfter`: a restart recreates every client and hands the
///   partitions to the rest of the group.
public final class WorkerHealth: Sendable {
    public struct Bounds: Sendable {
        /// Outcome writes failing this long (no success in between) make the worker not ready.
        public var writeFailureBound: Duration = .seconds(30)
        /// A delivery unfinished this long makes the worker not ready.
        public var stallBound: Duration = .seconds(300)
        /// Either condition lasting this long makes the worker not live.
        public var unhealthyAfter: Duration = .seconds(600)

        public init() {}
    }

    private struct State {
        var writesFailingSince: ContinuousClock.Instant?
        var writeFailures = 0
        /// Partitions whose dedupe state is incomplete, until when it matters.
        var incompleteDedupe: [Int32: Date] = [:]
        var lastFailureLog: ContinuousClock.Instant?
        var failuresNotLogged = 0
    }

    public let bounds: Bounds
    private let state = Locked(State())

    public init(bounds: Bounds = Bounds()) {
        self.bounds = bounds
    }

    /// An outcome write (status or DLQ record) was acknowledged, or failed.
    func recordWrite(succeeded: Bool, at now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            if succeeded {
                state.writesFailingSince = nil
            } else {
                state.writeFailures += 1
                if state.writesFailingSince == nil { state.writesFailingSince = now }
            }
        }
    }

    /// Whether a failed write should be logged now: at most one line a second, saying how many
    /// were not logged (1,000 deliveries retrying their writes must not write 1,000 lines a second).
    func shouldLogWriteFailure(at now: ContinuousClock.Instant = .now) -> (log: Bool, suppressed: Int) {
        state.withLock { state in
            if let last = state.lastFailureLog, now - last < .seconds(1) {
                state.failuresNotLogged += 1
                return (false, 0)
            }
            state.lastFailureLog = now
            defer { state.failuresNotLogged = 0 }
            return (true, state.failuresNotLogged)
        }
    }

    /// Records a partition's dedupe rebuild: `incompleteUntil` nil when complete, else until when
    /// the statuses it could not read still matter (then they are out of the dedupe window).
    func setDedupeCoverage(partition: Int32, incompleteUntil: Date?) {
        state.withLock { $0.incompleteDedupe[partition] = incompleteUntil }
    }

    /// Forgets partitions no longer owned.
    func retain(partitions: Set<Int32>) {
        state.withLock { state in state.incompleteDedupe = state.incompleteDedupe.filter { partitions.contains($0.key) } }
    }

    /// How long outcome writes have been failing (zero when the last one succeeded).
    func writesFailingFor(at now: ContinuousClock.Instant = .now) -> Duration {
        state.withLock { $0.writesFailingSince.map { now - $0 } ?? .zero }
    }

    public struct Report: Sendable, Equatable {
        public var ready: Bool
        public var live: Bool
        /// Why the worker is not ready or not live (empty when it is both).
        public var reasons: [String]
    }

    /// The verdict, given the partitions owned and the age of each one's oldest unfinished delivery.
    func report(owned: Int, oldestUnfinished: [Int32: Duration], now: Date = Date(),
                clock: ContinuousClock.Instant = .now) -> Report {
        var ready = true
        var live = true
        var reasons: [String] = []
        if owned == 0 {
            ready = false
            reasons.append("no partitions assigned")
        }
        let failing = writesFailingFor(at: clock)
        if failing >= bounds.writeFailureBound {
            ready = false
            reasons.append("outcome writes to Kafka have failed for \(Int(failing.inSeconds)) s")
            if failing >= bounds.unhealthyAfter { live = false }
        }
        if let (partition, age) = oldestUnfinished.max(by: { $0.value < $1.value }), age >= bounds.stallBound {
            ready = false
            reasons.append("a delivery of partition \(partition) has been unfinished for \(Int(age.inSeconds)) s")
            if age >= bounds.unhealthyAfter { live = false }
        }
        let incomplete = state.withLock { $0.incompleteDedupe.filter { $0.value > now } }
        if !incomplete.isEmpty {
            ready = false
            reasons.append("dedupe state of partitions \(incomplete.keys.sorted()) was rebuilt only in part")
        }
        return Report(ready: ready, live: live, reasons: reasons)
    }
}
