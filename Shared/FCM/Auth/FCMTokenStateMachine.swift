import Locking

/// An OAuth2 access token of one service account.
struct FCMAccessToken: Sendable, Hashable {
    /// `Bearer <token>`, ready for the authorization header. Never logged.
    let authorization: String
    /// Increases by one with every token obtained for the service account.
    let generation: Int
    /// From here on the token is renewed ahead of time (requests keep using it meanwhile).
    let renewAt: ContinuousClock.Instant
    /// From here on the token is not used any more (a little before the server's expiry, for clock skew).
    let expiresAt: ContinuousClock.Instant
}

/// The access-token cache of one service account: single flight, renewal before expiry, renewal on 401
/// without a storm, bounded retries of a failing token endpoint.
///
/// A value type behind the provider's lock; its methods return what the caller must do (resume waiters,
/// start the one fetch) so no I/O happens under the lock.
///
/// Rules:
/// 1. At most one token request is in flight. Requests without a usable token wait for it (each until its own deadline).
/// 2. A token is renewed once it reaches ``FCMAccessTokenPolicy/renewAt(lifetime:)`` (for Google's one-hour tokens: 5 minutes
///    before expiry); the request that notices starts the fetch and still uses the current token, as do all others.
/// 3. 401 for a request made with generation *g* (``reportRejected(generation:now:)``): if a newer token exists or *g*
///    was already reported, retry (the renewal is under way); otherwise *g* is dropped and one renewal follows — unless the
///    last forced renewal was less than ``FCMAccessTokenPolicy/minimumForcedRenewalInterval`` ago (then the caller reports the
///    credentials as refused), so a server that refuses every token cannot cause a loop.
/// 4. After a failed token request, requests without a usable token fail fast for a backoff that doubles per failure
///    (``FCMAccessTokenPolicy/failureBackoff(consecutiveFailures:)``); the next request after it tries again.
///
/// Generic over the waiter (a continuation in the provider, a plain value in tests).
struct FCMTokenStateMachine<Waiter> {

    enum RequestAction {
        /// Resume the caller now with this result.
        case resume(Result<FCMAccessToken, FCMError>)
        /// Resume the caller with this token and start the (one) fetch for its successor.
        case resumeAndFetch(FCMAccessToken)
        /// The caller is registered; a fetch is already running.
        case wait
        /// The caller is registered and must start the fetch.
        case waitAndFetch
    }

    let policy: FCMAccessTokenPolicy
    private(set) var current: FCMAccessToken?
    private(set) var fetching = false
    private var waiters: [Int: Waiter] = [:]
    private var generation = 0
    private var consecutiveFailures = 0
    private var failure: (error: FCMError, until: ContinuousClock.Instant)?
    private var invalidatedThrough = 0
    private var lastForcedRenewal: ContinuousClock.Instant?
    private var shutDown = false

    init(policy: FCMAccessTokenPolicy) {
        self.policy = policy
    }

    /// The current token when ``request(id:waiter:now:)`` would just hand it out (usable, not due for renewal),
    /// else nil (then call ``request(id:waiter:now:)``).
    func usableToken(now: ContinuousClock.Instant) -> FCMAccessToken? {
        guard !shutDown, let token = current, now < token.renewAt, now < token.expiresAt else { return nil }
        return token
    }

    mutating func request(id: Int, waiter: Waiter, now: ContinuousClock.Instant) -> RequestAction {
        if shutDown { return .resume(.failure(FCMError(.shuttingDown, "the FCM client is shutting down"))) }
        if let token = current, now < token.expiresAt {
            if now >= token.renewAt, !fetching, !inBackoff(now) {
                fetching = true
                return .resumeAndFetch(token)
            }
            return .resume(.success(token))
        }
        if !fetching, let failure, now < failure.until {
            return .resume(.failure(failure.error))
        }
        waiters[id] = waiter
        if fetching { return .wait }
        fetching = true
        return .waitAndFetch
    }

    /// A token arrived: it becomes current; the waiters get it.
    mutating func fetchSucceeded(authorization: String, lifetime: Duration, now: ContinuousClock.Instant) -> (FCMAccessToken, [Waiter]) {
        generation += 1
        let token = FCMAccessToken(
            authorization: authorization, generation: generation, renewAt: now + policy.renewAt(lifetime: lifetime),
            expiresAt: now + policy.usableFor(lifetime: lifetime))
        current = token
        fetching = false
        failure = nil
        consecutiveFailures = 0
        return (token, takeWaiters())
    }

    /// The token request failed: the waiters get the error, and requests without a token fail fast for a while.
    mutating func fetchFailed(_ error: FCMError, now: ContinuousClock.Instant) -> [Waiter] {
        fetching = false
        consecutiveFailures += 1
        failure = (error, now + policy.failureBackoff(consecutiveFailures: consecutiveFailures))
        return takeWaiters()
    }

    /// A waiter gave up (deadline or cancellation); `nil` when it was already resumed.
    mutating func removeWaiter(_ id: Int) -> Waiter? {
        waiters.removeValue(forKey: id)
    }

    /// FCM answered 401 to a request made with `generation`. Returns whether retrying with a (renewed) token makes sense.
    mutating func reportRejected(generation rejected: Int, now: ContinuousClock.Instant) -> Bool {
        if let current, current.generation > rejected { return true }
        if rejected <= invalidatedThrough { return true }
        if let last = lastForcedRenewal, now - last < policy.minimumForcedRenewalInterval { return false }
        invalidatedThrough = rejected
        lastForcedRenewal = now
        if current?.generation == rejected { current = nil }
        return true
    }

    mutating func shutdown() -> [Waiter] {
        shutDown = true
        return takeWaiters()
    }

    private func inBackoff(_ now: ContinuousClock.Instant) -> Bool {
        if let failure, now < failure.until { return true }
        return false
    }

    private mutating func takeWaiters() -> [Waiter] {
        defer { waiters = [:] }
        return Array(waiters.values)
    }
}

/// The timing rules of access tokens (see ``FCMTokenStateMachine``).
struct FCMAccessTokenPolicy: Sendable {
    var minimumForcedRenewalInterval: Duration
    var initialFailureBackoff: Duration
    var maximumFailureBackoff: Duration

    /// Renew 5 minutes before expiry, or at three quarters of the lifetime when that is later (short-lived tokens).
    func renewAt(lifetime: Duration) -> Duration {
        max(lifetime - .seconds(300), lifetime * 3 / 4)
    }

    /// Stop using a token a little before the server's expiry: a tenth of its lifetime, at most 10 s.
    func usableFor(lifetime: Duration) -> Duration {
        lifetime - min(.seconds(10), lifetime / 10)
    }

    /// The initial backoff doubling per consecutive failure up to the maximum (no jitter: one client's own renewals).
    func failureBackoff(consecutiveFailures: Int) -> Duration {
        Backoff(base: initialFailureBackoff, cap: maximumFailureBackoff).ceiling(afterFailures: consecutiveFailures)
    }
}
