import Locking

/// Token buckets keyed by a string (a client address, a call id): `ratePerSecond` tokens flow in
/// up to `burst`; a request takes one. At most `capacity` keys are tracked: beyond it the least
/// recently used key's bucket is forgotten (it starts full again), so the table's memory is bounded
/// whatever an attacker sends.
public final class KeyedRateLimiter: Sendable {
    struct Bucket {
        var tokens: Double
        var updated: Double
    }

    struct State {
        var buckets: [String: Bucket] = [:]
        var order = RecencyQueue<String>()
    }

    public let ratePerSecond: Double
    public let burst: Double
    public let capacity: Int
    private let now: @Sendable () -> Double
    private let state = Locked(State())

    public init(ratePerSecond: Double, burst: Double, capacity: Int = 100_000,
                now: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds) {
        self.ratePerSecond = ratePerSecond
        self.burst = max(1, burst)
        self.capacity = max(1, capacity)
        self.now = now
    }

    /// Takes one token for `key`: nil when allowed, else the seconds to wait (≥ 1, rounded up).
    public func acquire(_ key: String) -> Int? {
        let time = now()
        return state.withLock { state -> Int? in
            var bucket: Bucket
            if let known = state.buckets[key] {
                bucket = known
            } else {
                bucket = Bucket(tokens: burst, updated: time)
                state.order.append(key, stamp: time)
                while state.buckets.count >= capacity, let oldest = state.order.oldest(in: state.buckets, stamp: \.updated) {
                    state.order.removeOldest()
                    state.buckets[oldest.key] = nil
                }
            }
            bucket.tokens = min(burst, bucket.tokens + max(0, time - bucket.updated) * ratePerSecond)
            bucket.updated = time
            defer { state.buckets[key] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            let wait = (1 - bucket.tokens) / max(ratePerSecond, 0.001)
            return max(1, Int(wait.rounded(.up)))
        }
    }

    /// Keys tracked now.
    public var count: Int { state.withLock { $0.buckets.count } }
}
