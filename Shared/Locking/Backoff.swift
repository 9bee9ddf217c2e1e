/// Exponential backoff, capped, with full jitter: after the `n`th consecutive failure the wait is
/// drawn uniformly from zero up to `min(cap, base × 2^(n−1))`, so clients that failed together do
/// not come back together. The one rule behind the push worker's ring retries and the APNs
/// client's reconnects; ``ceiling(afterFailures:)`` alone is the schedule without jitter (the
/// FCM client's token renewal after a failed exchange).
public struct Backoff: Sendable, Hashable {
    /// The ceiling after the first failure.
    public var base: Duration
    /// The largest ceiling.
    public var cap: Duration

    public init(base: Duration, cap: Duration) {
        self.base = base
        self.cap = cap
    }

    /// `min(cap, base × 2^(failures − 1))`, never below zero; `failures` below 1 count as 1.
    public func ceiling(afterFailures failures: Int) -> Duration {
        let base = max(self.base, .zero), cap = max(self.cap, .zero)
        let factor = 1 << min(max(failures - 1, 0), 30)
        // Compared before multiplying: a large base times 2^30 would overflow.
        return base > cap / factor ? cap : base * factor
    }

    /// A wait drawn uniformly from zero to ``ceiling(afterFailures:)``.
    public func delay<R: RandomNumberGenerator>(afterFailures failures: Int, using random: inout R) -> Duration {
        ceiling(afterFailures: failures) * Double.random(in: 0...1, using: &random)
    }

    /// ``delay(afterFailures:using:)`` with the system random number generator.
    public func delay(afterFailures failures: Int) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return delay(afterFailures: failures, using: &generator)
    }
}
