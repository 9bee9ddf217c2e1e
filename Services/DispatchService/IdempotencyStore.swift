import Foundation
import Locking

/// Remembers answered requests by key for a bounded time and a bounded number of bytes, so the
/// same request again gets the same answer and a different request under the same key gets 409.
/// dispatch keys rings by (tenant, callId) and acks by (call, device, replay, outcome).
///
/// A repeat that arrives while the first is still in flight waits for its outcome instead of
/// publishing again. After a failure (503) the fingerprint is kept: the same request may run
/// again, a different one under the same key is still a conflict (some of the first request's
/// events may have reached Kafka).
public final class IdempotencyStore: Sendable {
    /// What to do with a request.
    public enum Decision: Sendable, Equatable {
        /// Publish it (first time, or again after a failure).
        case proceed
        /// Answer this stored response body.
        case replay(Data)
        /// Same key, different request: 409.
        case conflict
    }

    enum Outcome {
        case inFlight([CheckedContinuation<Void, Never>])
        case answered(Data)
        case failed
    }

    struct Entry {
        var fingerprint: [UInt8]
        var outcome: Outcome
        var storedAt: Double
        var bytes: Int
    }

    struct State {
        var entries: [String: Entry] = [:]
        var order = RecencyQueue<String>()
        var bytes = 0

        /// Forgets entries older than `window`, then the oldest while over `budget`; returns the
        /// waiters of forgotten in-flight entries (they run their request again).
        mutating func evict(now: Double, window: Double, budget: Int) -> [CheckedContinuation<Void, Never>] {
            var woken: [CheckedContinuation<Void, Never>] = []
            // Nothing is older than the front entry's stamp: most calls need no lookup at all.
            guard bytes > budget || (order.frontStamp ?? .infinity) < now - window else { return woken }
            while let oldest = order.oldest(in: entries, stamp: \.storedAt),
                  oldest.stamp < now - window || bytes > budget {
                order.removeOldest()
                guard let entry = entries.removeValue(forKey: oldest.key) else { continue }
                bytes -= entry.bytes
                if case .inFlight(let waiters) = entry.outcome { woken += waiters }
            }
            return woken
        }

        mutating func put(_ key: String, _ entry: Entry) {
            if let old = entries[key] { bytes -= old.bytes } else { order.append(key, stamp: entry.storedAt) }
            bytes += entry.bytes
            entries[key] = entry
        }
    }

    private let state = Locked(State())
    private let retention: Retention
    /// Most bytes held (keys, fingerprints, stored answers and bookkeeping, estimated).
    public var budgetBytes: Int { retention.budgetBytes }

    public init(window: Duration, budgetBytes: Int, now: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds) {
        retention = Retention(window: window, budgetBytes: budgetBytes, now: now)
    }

    /// Fixed cost of one entry besides its key, fingerprint and answer.
    static let entryOverhead = 160

    /// Decides about a request under `key` with this fingerprint and marks it in flight; a repeat
    /// of one in flight waits for its outcome.
    public func begin(key: String, fingerprint: [UInt8]) async -> Decision {
        while true {
            let time = retention.now()
            let (decision, woken) = state.withLock { state -> (Decision?, [CheckedContinuation<Void, Never>]) in
                let woken = state.evict(now: time, window: retention.window, budget: retention.budgetBytes)
                if let entry = state.entries[key] {
                    guard entry.fingerprint == fingerprint else { return (.conflict, woken) }
                    switch entry.outcome {
                    case .answered(let response): return (.replay(response), woken)
                    case .inFlight: return (nil, woken)
                    case .failed: break
                    }
                }
                state.put(key, Entry(fingerprint: fingerprint, outcome: .inFlight([]), storedAt: time,
                                     bytes: Self.entryOverhead + key.utf8.count + fingerprint.count))
                return (.proceed, woken)
            }
            for waiter in woken { waiter.resume() }
            if let decision { return decision }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waiting = state.withLock { state -> Bool in
                    guard var entry = state.entries[key], case .inFlight(var waiters) = entry.outcome else { return false }
                    waiters.append(continuation)
                    entry.outcome = .inFlight(waiters)
                    state.entries[key] = entry
                    return true
                }
                if !waiting { continuation.resume() }
            }
        }
    }

    /// Records the outcome of a request that got `.proceed`: the answer body, or nil when it failed.
    public func finish(key: String, fingerprint: [UInt8], response: Data?) {
        let time = retention.now()
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard let entry = state.entries[key], entry.fingerprint == fingerprint, case .inFlight(let waiters) = entry.outcome else { return [] }
            let bytes = Self.entryOverhead + key.utf8.count + fingerprint.count + (response?.count ?? 0)
            state.put(key, Entry(fingerprint: fingerprint, outcome: response.map { .answered($0) } ?? .failed, storedAt: entry.storedAt, bytes: bytes))
            return waiters + state.evict(now: time, window: retention.window, budget: retention.budgetBytes)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Keys remembered now.
    public var count: Int { state.withLock { $0.entries.count } }
    /// Estimated bytes held now.
    public var bytes: Int { state.withLock { $0.bytes } }
}
