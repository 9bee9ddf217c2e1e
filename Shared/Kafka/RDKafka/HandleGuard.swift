import Locking

/// Keeps a librdkafka handle alive while calls on it are in progress: ``enter()`` before a
/// call, ``leave()`` after; ``closeAndWait()`` refuses new calls and waits for running ones,
/// after which the handle may be destroyed.
final class HandleGuard: Sendable {
    private struct State {
        var closed = false
        var users = 0
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Locked(State())

    /// Returns `false` if the handle is (being) destroyed.
    func enter() -> Bool {
        state.withLock { state in
            guard !state.closed else { return false }
            state.users += 1
            return true
        }
    }

    func leave() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.users -= 1
            guard state.closed, state.users == 0 else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Runs the blocking librdkafka call `body` on a dedicated thread named `name`, with
    /// `client`'s handle kept alive meanwhile and `timeout` given to it in milliseconds. Fails
    /// with a shutdown error naming `owner` once the handle is (being) destroyed.
    func blockingCall<T: Sendable>(
        _ name: String,
        on client: RDKafkaClient,
        owner: String,
        timeout: Duration,
        _ body: @escaping @Sendable (OpaquePointer, Int32) -> Result<T, KafkaError>
    ) async throws(KafkaError) -> T {
        guard enter() else { throw KafkaError.shutdown(owner) }
        let handle = UncheckedHandle(client.handle)
        let timeoutMs = Int32(clamping: timeout.milliseconds)
        let result = await BlockingCall.run(name) { body(handle.pointer, timeoutMs) }
        leave()
        return try result.get()
    }

    func closeAndWait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                state.closed = true
                if state.users == 0 { return true }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }
}
