import HeapModule
import Locking

/// Deadlines of many concurrent waits, watched by one shared sweeper task that looks every
/// ``resolution`` and exists only while a deadline is pending.
///
/// A wait that must end at a bound registers its deadline here instead of starting a sleeping task
/// (a task per bounded call, cancelled when the call finished first, is the expensive way: it cost
/// dispatch measurable throughput). Nearly every deadline is removed before it is due, so
/// registering and removing are what must be cheap: a deadline goes into the bucket of its
/// ``resolution`` step (an array append and a dictionary insert under a lock), removing it is a
/// dictionary remove, and a sweep takes the due buckets whole. Ordering each deadline in a heap
/// instead (a sift over ~17 levels per deadline at dispatch's rates and bounds) was a measurable
/// share of a ring's CPU. An expired deadline fires up to ``resolution`` late.
public final class DeadlineSweeper: Sendable {
    /// The instance bounded sends use.
    public static let shared = DeadlineSweeper()

    /// A registered deadline, for ``remove(_:)``.
    public struct Token: Sendable, Hashable {
        fileprivate let id: UInt64
    }

    /// How often the sweeper looks for expired deadlines.
    public let resolution: Duration
    private let resolutionNanoseconds: Int64
    /// Steps are counted from here.
    private let origin = ContinuousClock.now

    private struct Entry {
        let deadline: ContinuousClock.Instant
        let expire: @Sendable () -> Void
    }
    private struct State {
        var entries: [UInt64: Entry] = [:]
        /// Ids by the resolution step their deadline falls in; ids removed early stay until their
        /// step comes up, then are skipped.
        var buckets: [Int64: [UInt64]] = [:]
        /// The steps that have a bucket, earliest first (a few hundred at most: the longest bound
        /// over the resolution).
        var steps = Heap<Int64>()
        var nextID: UInt64 = 0
        var sweeping = false
    }
    private let state = Locked(State())

    /// Creates a sweeper that looks every `resolution` (default 50 ms).
    public init(resolution: Duration = .milliseconds(50)) {
        self.resolution = resolution
        self.resolutionNanoseconds = max(1, Self.nanoseconds(resolution))
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
    }

    /// The resolution step `instant` falls in (rounded down, also before the origin).
    private func step(_ instant: ContinuousClock.Instant) -> Int64 {
        let nanoseconds = Self.nanoseconds(origin.duration(to: instant))
        return nanoseconds >= 0 ? nanoseconds / resolutionNanoseconds : (nanoseconds - resolutionNanoseconds + 1) / resolutionNanoseconds
    }

    /// Registers `expire` to run (on the sweeper's task) once `deadline` has passed, unless
    /// removed before. `expire` must not block.
    public func add(at deadline: ContinuousClock.Instant, _ expire: @escaping @Sendable () -> Void) -> Token {
        let step = step(deadline)
        let (id, startSweeper) = state.withLock { state -> (UInt64, Bool) in
            state.nextID &+= 1
            let id = state.nextID
            state.entries[id] = Entry(deadline: deadline, expire: expire)
            if state.buckets[step]?.append(id) == nil {
                state.buckets[step] = [id]
                state.steps.insert(step)
            }
            defer { state.sweeping = true }
            return (id, !state.sweeping)
        }
        if startSweeper { Task { await self.sweep() } }
        return Token(id: id)
    }

    /// Registers `expire` to run once `bound` has passed, unless removed before.
    public func add(after bound: Duration, _ expire: @escaping @Sendable () -> Void) -> Token {
        add(at: .now + bound, expire)
    }

    /// Forgets a deadline (its wait ended first). Returns `false` if it had already expired.
    @discardableResult
    public func remove(_ token: Token) -> Bool {
        state.withLock { $0.entries.removeValue(forKey: token.id) } != nil
    }

    /// Deadlines neither expired nor removed.
    public var pendingCount: Int { state.withLock { $0.entries.count } }

    private func sweep() async {
        while true {
            try? await Task.sleep(for: resolution)
            let now = ContinuousClock.now
            let current = step(now)
            let (expired, more) = state.withLock { state -> ([@Sendable () -> Void], Bool) in
                var expired: [@Sendable () -> Void] = []
                while let first = state.steps.min, first <= current {
                    let ids = state.buckets.removeValue(forKey: first) ?? []
                    state.steps.removeMin()
                    guard first == current else {
                        // A past step: every deadline in it is due.
                        for id in ids { if let entry = state.entries.removeValue(forKey: id) { expired.append(entry.expire) } }
                        continue
                    }
                    // The current step: only the deadlines already passed; the rest wait for the next sweep.
                    var waiting: [UInt64] = []
                    for id in ids {
                        guard let entry = state.entries[id] else { continue }
                        if entry.deadline <= now {
                            state.entries[id] = nil
                            expired.append(entry.expire)
                        } else {
                            waiting.append(id)
                        }
                    }
                    if !waiting.isEmpty {
                        state.buckets[first] = waiting
                        state.steps.insert(first)
                    }
                    break
                }
                if state.entries.isEmpty {
                    state.buckets = [:]
                    state.steps = Heap()
                    state.sweeping = false
                }
                return (expired, state.sweeping)
            }
            for expire in expired { expire() }
            if !more { return }
        }
    }
}
