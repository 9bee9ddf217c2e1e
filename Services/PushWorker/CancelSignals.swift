import Foundation
import Locking

/// Cancelled calls, and the deliveries of those calls that are waiting to retry.
///
/// A `cancel` event marks its call; a delivery that is pending or sleeping before a retry wakes at
/// once and ends `cancelled`. A push already on the wire is not recalled (Apple: never send a
/// second push to cancel), so a delivery whose push was accepted stays `sent`.
/// Marks are kept until `forgetAfter`, and at most `capacity` of them (when full, the mark that
/// would be forgotten soonest goes first), so memory stays bounded under any stream of cancels.
/// Processed cancels are also written to the status topic, and a new owner of a partition
/// rebuilds its marks from there (`PartitionCoordinator`), so a cancel outlives the process.
public final class CancelSignals: Sendable {
    private struct Waiter {
        var continuation: CheckedContinuation<Void, Never>?
        var callId: String
    }

    private struct State {
        var cancelled: ExpiringSet<String>
        var waiters: [UInt64: Waiter] = [:]
        var abandoned: Set<UInt64> = []
        var nextID: UInt64 = 0
    }

    private let state: Locked<State>

    /// - Parameter capacity: the most calls remembered at once.
    public init(capacity: Int = 200_000) {
        state = Locked(State(cancelled: ExpiringSet(capacity: capacity)))
    }

    /// Marks `callId` cancelled until `forgetAfter` and wakes its waiting deliveries.
    public func cancel(callId: String, forgetAfter: Date) {
        let woken: [CheckedContinuation<Void, Never>] = state.withLock { state in
            state.cancelled.insert(callId, until: forgetAfter)
            var woken: [CheckedContinuation<Void, Never>] = []
            for (id, waiter) in state.waiters where waiter.callId == callId {
                if let continuation = waiter.continuation { woken.append(continuation) }
                state.waiters[id] = nil
            }
            return woken
        }
        for continuation in woken { continuation.resume() }
    }

    public func isCancelled(_ callId: String) -> Bool {
        state.withLock { $0.cancelled.contains(callId) }
    }

    /// Number of remembered cancellations (a gauge).
    public var count: Int { state.withLock { $0.cancelled.count } }

    /// Marks dropped to make room before their time (should stay 0).
    public var evicted: Int { state.withLock { $0.cancelled.evicted } }

    /// Forgets marks whose `forgetAfter` has passed.
    public func expire(now: Date) {
        state.withLock { $0.cancelled.expire(before: now) }
    }

    /// Sleeps for `duration` unless `callId` is cancelled first. Returns true when cancelled.
    /// Task cancellation ends the sleep too (returns false).
    public func sleep(for duration: Duration, unlessCancelled callId: String) async -> Bool {
        if isCancelled(callId) { return true }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                try? await Task.sleep(for: duration)
                return false
            }
            group.addTask { await self.waitForCancel(callId) }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// Returns true when `callId` gets cancelled, false when the waiting task is cancelled.
    private func waitForCancel(_ callId: String) async -> Bool {
        let id: UInt64 = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.abandoned.remove(id) != nil || state.cancelled.contains(callId) { return true }
                    state.waiters[id] = Waiter(continuation: continuation, callId: callId)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Void, Never>? = state.withLock { state in
                if let waiter = state.waiters.removeValue(forKey: id) { return waiter.continuation }
                state.abandoned.insert(id)
                return nil
            }
            continuation?.resume()
        }
        return state.withLock { state in
            state.abandoned.remove(id)
            return state.cancelled.contains(callId)
        }
    }
}
