import Locking

/// Coordinates the read loop and its watchdog: the watchdog may close the consumer only while
/// no record is being processed, so a publish is always followed by its commit.
final class ReplayGate: Sendable {
    private struct State {
        var busy = false
        var stop = false
        var closed = false
        var lastActivity = ContinuousClock.now
    }
    private let state = Locked(State())

    /// Before processing a record; `false` means stop.
    func begin() -> Bool {
        state.withLock { state in
            guard !state.stop else { return false }
            state.busy = true
            state.lastActivity = .now
            return true
        }
    }

    func end() {
        state.withLock { state in
            state.busy = false
            state.lastActivity = .now
        }
    }

    var isStopping: Bool { state.withLock { $0.stop } }

    func idle(longerThan bound: Duration) -> Bool {
        state.withLock { !$0.busy && ContinuousClock.now - $0.lastActivity > bound }
    }

    /// Asks the loop to stop; returns `true` (once) when the caller may close the consumer:
    /// no record is being processed. Callers retry while it returns `false`.
    func requestStop() -> Bool {
        state.withLock { state in
            state.stop = true
            guard !state.busy, !state.closed else { return false }
            state.closed = true
            return true
        }
    }
}
