import Synchronization

/// Lets async code wait for a dedicated thread to reach its end.
final class ThreadExit: Sendable {
    private let state = Mutex<(finished: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// Called by the thread as its last action.
    func finish() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.finished = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// Returns once the thread called ``finish()``.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.finished { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
