/// A value that is set once and that async code can wait for: a thread reaching its end, a
/// server's bound port, a child process's exit. The one waiter registry for such events.
public final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var nextID = 0
        var waiters: [Int: CheckedContinuation<Value?, Never>] = [:]
        /// Waits whose timeout ran out before they were registered.
        var expired: Set<Int> = []
    }

    private let state = Locked(State())

    public init() {}

    /// Sets the value and resumes every waiter. Only the first call sets it; returns whether this
    /// call did.
    @discardableResult
    public func set(_ value: Value) -> Bool {
        let waiters = state.withLock { state -> [CheckedContinuation<Value?, Never>]? in
            guard state.value == nil else { return nil }
            state.value = value
            state.expired = []
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        guard let waiters else { return false }
        for waiter in waiters { waiter.resume(returning: value) }
        return true
    }

    /// The value, once set.
    public var value: Value? { state.withLock { $0.value } }

    /// Returns the value once it is set.
    public func wait() async -> Value {
        while true {
            if let value = await wait(timeout: nil) { return value }
        }
    }

    /// Returns the value once it is set, or `nil` if `timeout` (`nil`: none) runs out first.
    public func wait(timeout: Duration?) async -> Value? {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let timer = timeout.map { timeout in
            Task {
                try? await Task.sleep(for: timeout)
                guard !Task.isCancelled else { return }
                let expired = self.state.withLock { state -> CheckedContinuation<Value?, Never>? in
                    if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
                    if state.value == nil { state.expired.insert(id) }
                    return nil
                }
                expired?.resume(returning: nil)
            }
        }
        defer { timer?.cancel() }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
            let answer = state.withLock { state -> Value?? in
                if let value = state.value { return .some(value) }
                if state.expired.remove(id) != nil { return .some(nil) }
                state.waiters[id] = continuation
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }
}
