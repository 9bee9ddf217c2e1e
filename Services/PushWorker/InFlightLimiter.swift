import DequeModule
import Locking

/// Bounds the deliveries in flight. When every slot is taken, `acquire` suspends — the worker
/// stops pulling messages, the Kafka layer's bounded buffer fills and fetching pauses — so
/// memory stays flat under any backlog.
public final class InFlightLimiter: Sendable {
    private struct State {
        var available: Int
        /// Each waiter with the slots it asks for, served in order.
        var waiters: Deque<(id: UInt64, count: Int, continuation: CheckedContinuation<Bool, Never>)> = []
        var nextID: UInt64 = 0
        /// Requests that must wait, between the fast path's check and joining `waiters`.
        var joining: Set<UInt64> = []
        /// Requests cancelled while `joining`: they give up as they join.
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
        await acquire(count: 1)
    }

    /// Takes `count` slots at once (a run of deliveries; at most `limit`), waiting until that many
    /// are free. Returns false, without any slot, when the waiting task is cancelled.
    public func acquire(count requested: Int) async -> Bool {
        let count = min(max(1, requested), limit)
        if Task.isCancelled { return false }
        // Fast path: a free slot is taken without suspending (a continuation would re-enqueue the
        // consume loop on the executor once per event even when nothing has to wait).
        let taken = state.withLock { state -> UInt64? in
            if state.available >= count, state.waiters.isEmpty {
                state.available -= count
                return nil
            }
            state.nextID += 1
            state.joining.insert(state.nextID)
            return state.nextID
        }
        guard let id = taken else { return true }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let granted = state.withLock { state -> Bool? in
                    state.joining.remove(id)
                    if state.abandoned.remove(id) != nil { return false }
                    if state.available >= count, state.waiters.isEmpty {
                        state.available -= count
                        return true
                    }
                    state.waiters.append((id, count, continuation))
                    return nil
                }
                if let granted { continuation.resume(returning: granted) }
            }
        } onCancel: {
            let (waiter, granted) = state.withLock { state -> (CheckedContinuation<Bool, Never>?, [CheckedContinuation<Bool, Never>]) in
                if let index = state.waiters.firstIndex(where: { $0.id == id }) {
                    let waiter = state.waiters.remove(at: index).continuation
                    // A large request leaving the head may let smaller ones behind it in.
                    return (waiter, Self.grant(&state))
                }
                // Not waiting: about to join (it gives up then), or already granted (it keeps its slots).
                if state.joining.contains(id) { state.abandoned.insert(id) }
                return (nil, [])
            }
            waiter?.resume(returning: false)
            for next in granted { next.resume(returning: true) }
        }
    }

    /// Returns a slot (to the longest waiter, if any).
    public func release() {
        release(count: 1)
    }

    /// Returns `count` slots (to the longest waiters they satisfy, in order).
    public func release(count: Int) {
        guard count > 0 else { return }
        let granted = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.available = min(state.available + count, limit)
            return Self.grant(&state)
        }
        for next in granted { next.resume(returning: true) }
    }

    /// Hands free slots to the waiters at the head whose requests fit, in order (a later, smaller
    /// request does not overtake a larger one: it would starve it).
    private static func grant(_ state: inout State) -> [CheckedContinuation<Bool, Never>] {
        var granted: [CheckedContinuation<Bool, Never>] = []
        while let first = state.waiters.first, first.count <= state.available {
            state.available -= first.count
            state.waiters.removeFirst()
            granted.append(first.continuation)
        }
        return granted
    }

    /// Requests waiting for slots.
    package var waiting: Int { state.withLock { $0.waiters.count } }

    /// Cancelled requests remembered until they join the queue (none once every request returned).
    var abandonedCount: Int { state.withLock { $0.abandoned.count } }

    /// Slots in use.
    public var inUse: Int { state.withLock { limit - $0.available } }
}
