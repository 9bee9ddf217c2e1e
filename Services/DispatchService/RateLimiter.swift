import Foundation
import Locking

/// A token bucket per API key: `ratePerSecond` tokens flow in, up to `burst`; a request takes one.
/// When the bucket is empty the answer says how long until the next token (for `Retry-After`).
public final class RateLimiter: Sendable {
    struct Bucket {
        var tokens: Double
        var updated: Double
    }

    /// Seconds on a monotonic clock (injected by tests).
    private let now: @Sendable () -> Double
    private let buckets = Locked<[String: Bucket]>([:])

    public init(now: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds) {
        self.now = now
    }

    /// Seconds since an arbitrary start, monotonic.
    public static func monotonicSeconds() -> Double {
        -ContinuousClock.now.duration(to: ContinuousClock.Instant.referenceStart).inSeconds
    }

    /// Takes one token for `key`: nil when allowed, else the seconds to wait (≥ 1, rounded up).
    public func acquire(_ key: APIKey) -> Int? {
        let time = now()
        return buckets.withLock { buckets -> Int? in
            var bucket = buckets[key.name] ?? Bucket(tokens: key.burst, updated: time)
            bucket.tokens = min(key.burst, bucket.tokens + max(0, time - bucket.updated) * key.ratePerSecond)
            bucket.updated = time
            defer { buckets[key.name] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            let wait = (1 - bucket.tokens) / max(key.ratePerSecond, 0.001)
            return max(1, Int(wait.rounded(.up)))
        }
    }
}

extension ContinuousClock.Instant {
    /// A fixed instant taken once per process, so instants can be turned into plain seconds.
    static let referenceStart = ContinuousClock.now
}
