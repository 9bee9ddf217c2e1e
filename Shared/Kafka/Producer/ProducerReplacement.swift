/// Which librdkafka client a ``KafkaProducer`` sends through, and when a failed one is replaced.
/// Kept behind a lock by the producer; methods return what to do.
///
/// A fatal error is replaced at once; a client that fails again within `maxBackoff` of the last
/// replacement is replaced `backoff` after it, the wait doubling up to `maxBackoff`, so a client
/// that is fatal again at once (e.g. a missing cluster permission for the idempotent producer) is
/// not recreated in a tight loop.
struct ProducerReplacement {
    private(set) var current: ProducerClient
    private(set) var replacements = 0
    private(set) var stopped = false
    /// Replaced clients still flushing and being destroyed.
    private(set) var retiring: [ObjectIdentifier: ProducerClient] = [:]
    /// The task that waits out the back-off and replaces `current`, while one is pending.
    var pending: Task<Void, Never>?
    private var replacing = false
    private var lastReplacement: ContinuousClock.Instant?
    private var nextBackoff: Duration
    let initialBackoff: Duration
    let maxBackoff: Duration

    init(_ client: ProducerClient, backoff: Duration, maxBackoff: Duration) {
        self.current = client
        self.initialBackoff = backoff
        self.nextBackoff = backoff
        self.maxBackoff = max(backoff, maxBackoff)
    }

    enum FailureAction: Equatable {
        case none
        /// Replace `current` after this wait.
        case replace(after: Duration)
    }

    /// `client` hit a fatal error.
    mutating func failed(_ client: ProducerClient, now: ContinuousClock.Instant) -> FailureAction {
        guard !stopped, client === current, !replacing else { return .none }
        replacing = true
        guard let last = lastReplacement, now - last < maxBackoff else {
            nextBackoff = initialBackoff
            return .replace(after: .zero)
        }
        let wait = max(.zero, last + nextBackoff - now)
        nextBackoff = min(nextBackoff * 2, maxBackoff)
        return .replace(after: wait)
    }

    /// A new client is ready. Returns the one it replaces (to retire), or `nil` when the producer
    /// stopped meanwhile (then shut `fresh` down instead).
    mutating func replace(with fresh: ProducerClient, now: ContinuousClock.Instant) -> ProducerClient? {
        replacing = false
        pending = nil
        guard !stopped else { return nil }
        let broken = current
        current = fresh
        replacements += 1
        lastReplacement = now
        retiring[ObjectIdentifier(broken)] = broken
        return broken
    }

    /// Creating the new client failed: the next failure report tries again, after the back-off.
    mutating func replacementFailed(now: ContinuousClock.Instant) {
        replacing = false
        pending = nil
        lastReplacement = now
    }

    /// A replaced client finished shutting down.
    mutating func retired(_ client: ProducerClient) {
        retiring[ObjectIdentifier(client)] = nil
    }

    /// The producer shuts down: everything to shut down and the pending replacement to cancel.
    mutating func stop() -> (clients: [ProducerClient], pending: Task<Void, Never>?) {
        stopped = true
        defer { pending = nil }
        return ([current] + retiring.values, pending)
    }
}
