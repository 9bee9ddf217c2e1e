import Foundation
import Locking

/// Cancelled calls, and the deliveries of those calls that are waiting to retry.
///
/// A `cancel` event marks its call; a delivery that is pending or sleeping before a retry wakes at
/// once and ends `cancelled`. A push already on the wire is not recalled (Apple: never send a
/// second push to cancel), so a delivery whose push was accepted stays `sent`.
/// Marks are kept until `forgetAfter` so memory stays bounded by the ring window.
public final class CancelSignals: Sendable {
    private struct Waiter {
        var continuation: CheckedContinuation<Void, Never>?
        var callId: String
    }

    private struct State {
        var cancelled: [String: Date] = [:]
        var waiters: [UInt64: Waiter] = [:]
        var abandoned: Set<UInt64> = []
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())

    public init() {}

    /// Marks `callId` cancelled until `forgetAfter` and wakes its waiting deliveries.
    public func cancel(callId: String, forgetAfter: Date) {
        let woken: [CheckedContinuation<Void, Never>] = state.withLock { state in
            state.cancelled[callId] = max(state.cancelled[callId] ?? forgetAfter, forgetAfter)
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
        state.withLock { $0.cancelled[callId] != nil }
    }

    /// Number of remembered cancellations (a gauge).
    public var count: Int { state.withLock { $0.cancelled.count } }

    /// Forgets marks older than their `forgetAfter`.
    public func expire(now: Date) {
        state.withLock { state in state.cancelled = state.cancelled.filter { $0.value > now } }
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
                    if state.abandoned.remove(id) != nil || state.cancelled[callId] != nil { return true }
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
            return state.cancelled[callId] != nil
        }
    }
}
