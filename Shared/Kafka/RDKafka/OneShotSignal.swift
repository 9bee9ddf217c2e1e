import Locking

/// A one-shot event async code can wait for (e.g. a dedicated thread reaching its end).
final class OneShotSignal: Sendable {
    private struct State {
        var finished = false
        var nextID = 0
        var waiters: [Int: CheckedContinuation<Bool, Never>] = [:]
    }
    private let state = Locked(State())

    /// Signals the event (idempotent).
    func finish() {
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            guard !state.finished else { return [] }
            state.finished = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: true) }
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// Returns once the event happened.
    func wait() async {
        _ = await wait(timeout: nil)
    }

    /// Returns `true` once the event happened, or `false` if `timeout` ran out first.
    func wait(timeout: Duration?) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let id = state.withLock { state -> Int? in
                if state.finished { return nil }
                state.nextID += 1
                state.waiters[state.nextID] = continuation
                return state.nextID
            }
            guard let id else {
                continuation.resume(returning: true)
                return
            }
            guard let timeout else { return }
            Task {
                try? await Task.sleep(for: timeout)
                let expired = self.state.withLock { $0.waiters.removeValue(forKey: id) }
                expired?.resume(returning: false)
            }
        }
    }
}
