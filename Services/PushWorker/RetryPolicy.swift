import Foundation
import Locking

/// When to try a retryable push again: exponential backoff with full jitter, capped (``Backoff``), and never
/// past the ring deadline (a call that would ring after the caller gave up is harmful).
public struct RetryPolicy: Sendable, Hashable {
    /// First backoff ceiling.
    public var base: Duration
    /// Largest backoff ceiling.
    public var cap: Duration
    /// Most attempts per delivery (the first push included).
    public var maxAttempts: Int
    /// An attempt is not started when less than this remains before the deadline.
    public var minimumRemaining: Duration

    public init(base: Duration = .milliseconds(100), cap: Duration = .seconds(5), maxAttempts: Int = 20,
                minimumRemaining: Duration = .milliseconds(50)) {
        self.base = base
        self.cap = cap
        self.maxAttempts = maxAttempts
        self.minimumRemaining = minimumRemaining
    }

    public enum Decision: Sendable, Hashable {
        /// Wait this long, then make attempt `attempt + 1`.
        case retry(after: Duration)
        /// The deadline does not leave room for another attempt: the delivery ends `expired`.
        case expire
        /// Attempts are exhausted: the delivery ends `failed`.
        case giveUp
    }

    /// The decision after attempt number `attempt` (1-based) failed with a retryable outcome.
    /// `minimumDelay` is a floor the outcome imposes (e.g. APNs 429).
    public func decide<R: RandomNumberGenerator>(
        afterAttempt attempt: Int, now: Date, ringDeadline: Date,
        minimumDelay: Duration = .zero, using random: inout R
    ) -> Decision {
        guard attempt < maxAttempts else { return .giveUp }
        let delay = max(Backoff(base: base, cap: cap).delay(afterFailures: attempt, using: &random), minimumDelay)
        let remaining = ringDeadline.timeIntervalSince(now)
        guard remaining - delay.inSeconds >= minimumRemaining.inSeconds else { return .expire }
        return .retry(after: delay)
    }

    /// `decide` with the system random number generator.
    public func decide(afterAttempt attempt: Int, now: Date, ringDeadline: Date, minimumDelay: Duration = .zero) -> Decision {
        var generator = SystemRandomNumberGenerator()
        return decide(afterAttempt: attempt, now: now, ringDeadline: ringDeadline, minimumDelay: minimumDelay, using: &generator)
    }
}
