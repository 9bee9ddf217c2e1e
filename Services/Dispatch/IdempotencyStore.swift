import DequeModule
import Foundation
import Locking

/// Remembers answered `POST /v1/calls` by callId for a bounded time and count, so that the same
/// request again gets the same answer and a different request under the same id gets 409.
///
/// Only 202 answers are remembered: after a 503 the client retries with the same id and the
/// request runs again (the worker deduplicates events that did reach Kafka).
public final class IdempotencyStore: Sendable {
    /// What to do with a request.
    public enum Decision: Sendable, Equatable {
        /// Publish it (first time, or a repeat of one still in flight or not acknowledged).
        case proceed
        /// Answer this stored response body.
        case replay(Data)
        /// Same id, different request: 409.
        case conflict
    }

    struct Entry {
        var fingerprint: [UInt8]
        var response: Data?
        var storedAt: Double
    }

    struct State {
        var entries: [String: Entry] = [:]
        var order: Deque<(callId: String, storedAt: Double)> = []

        mutating func evict(now: Double, window: Double, capacity: Int) {
            while let oldest = order.first, oldest.storedAt < now - window || entries.count > capacity {
                order.removeFirst()
                if let entry = entries[oldest.callId], entry.storedAt == oldest.storedAt { entries[oldest.callId] = nil }
            }
        }
    }

    private let state = Locked(State())
    private let window: Double
    private let capacity: Int
    private let now: @Sendable () -> Double

    public init(window: Duration, capacity: Int, now: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds) {
        self.window = Double(window.components.seconds) + Double(window.components.attoseconds) / 1e18
        self.capacity = max(1, capacity)
        self.now = now
    }

    /// Decides about a request for `callId` with this fingerprint and marks it in flight.
    public func begin(callId: String, fingerprint: [UInt8]) -> Decision {
        let time = now()
        return state.withLock { state -> Decision in
            state.evict(now: time, window: window, capacity: capacity)
            if let entry = state.entries[callId] {
                guard entry.fingerprint == fingerprint else { return .conflict }
                if let response = entry.response { return .replay(response) }
                return .proceed
            }
            state.entries[callId] = Entry(fingerprint: fingerprint, response: nil, storedAt: time)
            state.order.append((callId, time))
            return .proceed
        }
    }

    /// Records the outcome: the 202 body, or nil when the request failed (forgotten, so a retry runs again).
    public func finish(callId: String, fingerprint: [UInt8], response: Data?) {
        let time = now()
        state.withLock { state in
            guard let entry = state.entries[callId], entry.fingerprint == fingerprint, entry.response == nil else { return }
            if let response {
                state.entries[callId] = Entry(fingerprint: fingerprint, response: response, storedAt: time)
                state.order.append((callId, time))
            } else {
                state.entries[callId] = nil
            }
            state.evict(now: time, window: window, capacity: capacity)
        }
    }

    /// Calls remembered now.
    public var count: Int { state.withLock { $0.entries.count } }
}
