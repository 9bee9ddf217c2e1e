import HeapModule
import Locking

/// Deadlines of many concurrent waits, watched by one shared sweeper task that looks every
/// ``resolution`` and exists only while a deadline is pending.
///
/// A wait that must end at a bound registers its deadline here instead of starting a sleeping task
/// (a task per bounded call, cancelled when the call finished first, is the expensive way: it cost
/// dispatch measurable throughput). Registering is a heap insert and a dictionary insert under a
/// lock; removing is a dictionary remove. An expired deadline fires up to ``resolution`` late.
public final class DeadlineSweeper: Sendable {
    /// The instance bounded sends use.
    public static let shared = DeadlineSweeper()

    /// A registered deadline, for ``remove(_:)``.
    public struct Token: Sendable, Hashable {
        fileprivate let id: UInt64
    }

    /// How often the sweeper looks for expired deadlines.
    public let resolution: Duration

    private struct Entry {
        let deadline: ContinuousClock.Instant
        let expire: @Sendable () -> Void
    }
    /// A deadline in the heap; ones removed early stay there until they come up, then are skipped.
    private struct Due: Comparable {
        let deadline: ContinuousClock.Instant
        let id: UInt64
        static func < (a: Due, b: Due) -> Bool { (a.deadline, a.id) < (b.deadline, b.id) }
    }
    private struct State {
        var entries: [UInt64: Entry] = [:]
        /// Earliest first: a sweep looks only at what is due, not at every pending wait.
        var due = Heap<Due>()
        var nextID: UInt64 = 0
        var sweeping = false
    }
    private let state = Locked(State())

    /// Creates a sweeper that looks every `resolution` (default 50 ms).
    public init(resolution: Duration = .milliseconds(50)) {
        self.resolution = resolution
    }

    /// Registers `expire` to run (on the sweeper's task) once `deadline` has passed, unless
    /// removed before. `expire` must not block.
    public func add(at deadline: ContinuousClock.Instant, _ expire: @escaping @Sendable () -> Void) -> Token {
        let (id, startSweeper) = state.withLock { state -> (UInt64, Bool) in
            state.nextID &+= 1
            state.entries[state.nextID] = Entry(deadline: deadline, expire: expire)
            state.due.insert(Due(deadline: deadline, id: state.nextID))
            defer { state.sweeping = true }
            return (state.nextID, !state.sweeping)
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
            let (expired, more) = state.withLock { state -> ([@Sendable () -> Void], Bool) in
                var expired: [@Sendable () -> Void] = []
                while let next = state.due.min, next.deadline <= now {
                    state.due.removeMin()
                    if let entry = state.entries.removeValue(forKey: next.id) { expired.append(entry.expire) }
                }
                if state.entries.isEmpty {
                    state.due = Heap()
                    state.sweeping = false
                }
                return (expired, state.sweeping)
            }
            for expire in expired { expire() }
            if !more { return }
        }
    }
}
