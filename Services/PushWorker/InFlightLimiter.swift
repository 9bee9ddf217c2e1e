import DequeModule
import Locking

/// Bounds the deliveries in flight. When every slot is taken, `acquire` suspends — the worker
/// stops pulling messages, the Kafka layer's bounded buffer fills and fetching pauses — so
/// memory stays flat under any backlog.
public final class InFlightLimiter: Sendable {
    private struct State {
        var available: Int
        var waiters: Deque<(id: UInt64, continuation: CheckedContinuation<Bool, Never>)> = []
        var nextID: UInt64 = 0
        var abandoned: Set<UInt64> = []
    }

    private let state: Locked<State>
    public let limit: Int

    public init(limit: Int) {
        self.limit = max(1, limit)
        self.state = Locked(State(available: max(1, limit)))
    }

    /// Takes a slot, waiting for one if necessary. Returns false, without a slot, when the
    /// waiting task is cancelled.
    public func acquire() async -> Bool {
        if Task.isCancelled { return false }
        // Fast path: a free slot is taken without suspending (a continuation would re-enqueue the
        // consume loop on the executor once per event even when nothing has to wait).
        let taken = state.withLock { state -> UInt64? in
            if state.available > 0, state.waiters.isEmpty {
                state.available -= 1
                return nil
            }
            state.nextID += 1
            return state.nextID
        }
        guard let id = taken else { return true }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let granted = state.withLock { state -> Bool? in
                    if state.abandoned.remove(id) != nil { return false }
                    if state.available > 0 {
                        state.available -= 1
                        return true
                    }
                    state.waiters.append((id, continuation))
                    return nil
                }
                if let granted { continuation.resume(returning: granted) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                if let index = state.waiters.firstIndex(where: { $0.id == id }) {
                    return state.waiters.remove(at: index).continuation
                }
                state.abandoned.insert(id)
                return nil
            }
            waiter?.resume(returning: false)
        }
    }

    /// Returns a slot (to the longest waiter, if any).
    public func release() {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            if let waiter = state.waiters.popFirst() { return waiter.continuation }
            state.available = min(state.available + 1, limit)
            return nil
        }
        next?.resume(returning: true)
    }

    /// Slots in use.
    public var inUse: Int { state.withLock { limit - $0.available } }
}
