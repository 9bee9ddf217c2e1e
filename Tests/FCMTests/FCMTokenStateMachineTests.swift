@testable import FCM
import Testing

@Suite("FCM access tokens: single flight, renewal, 401 without a storm")
struct FCMTokenStateMachineTests {
    typealias Machine = FCMTokenStateMachine<Int>
    static let policy = FCMAccessTokenPolicy(
        minimumForcedRenewalInterval: .seconds(30), initialFailureBackoff: .seconds(1), maximumFailureBackoff: .seconds(30))
    static let hour = Duration.seconds(3600)

    /// A machine whose first request, at `t0`, fetched token `Bearer a` with `lifetime`.
    static func holdingToken(lifetime: Duration = FCMTokenStateMachineTests.hour) -> (machine: Machine, token: FCMAccessToken, t0: ContinuousClock.Instant) {
        var machine = Machine(policy: policy)
        let t0 = ContinuousClock.now
        _ = machine.request(id: 0, waiter: 0, now: t0)
        let (token, _) = machine.fetchSucceeded(authorization: "Bearer a", lifetime: lifetime, now: t0)
        return (machine, token, t0)
    }

    @Test("many requests without a token start one fetch; all of them get its token")
    func singleFlight() {
        var machine = Machine(policy: Self.policy)
        let t0 = ContinuousClock.now
        var fetches = 0
        for id in 0..<50 {
            switch machine.request(id: id, waiter: id, now: t0) {
            case .waitAndFetch: fetches += 1
            case .wait: break
            default: Issue.record("request \(id) did not wait")
            }
        }
        #expect(fetches == 1)
        let (token, waiters) = machine.fetchSucceeded(authorization: "Bearer a", lifetime: Self.hour, now: t0)
        #expect(waiters.sorted() == Array(0..<50))
        #expect(token.generation == 1)
        guard case .resume(.success(let cached)) = machine.request(id: 99, waiter: 99, now: t0 + .seconds(60)) else {
            Issue.record("the cached token was not used")
            return
        }
        #expect(cached == token)
    }

    @Test("a one-hour token is renewed 5 minutes before expiry, once, while requests keep using it")
    func renewBeforeExpiry() {
        let held = Self.holdingToken()
        var machine = held.machine
        let (first, t0) = (held.token, held.t0)
        guard case .resume(.success) = machine.request(id: 1, waiter: 1, now: t0 + .seconds(3299)) else {
            Issue.record("renewed too early")
            return
        }
        guard case .resumeAndFetch(let used) = machine.request(id: 2, waiter: 2, now: t0 + .seconds(3301)) else {
            Issue.record("not renewed 5 minutes before expiry")
            return
        }
        #expect(used == first)
        guard case .resume(.success(let stillFirst)) = machine.request(id: 3, waiter: 3, now: t0 + .seconds(3302)) else {
            Issue.record("a second renewal started")
            return
        }
        #expect(stillFirst == first)
        let (second, waiters) = machine.fetchSucceeded(authorization: "Bearer b", lifetime: Self.hour, now: t0 + .seconds(3303))
        #expect(waiters.isEmpty)
        #expect(second.generation == 2)
    }

    @Test("a short-lived token is renewed at three quarters of its life and not used in its last tenth")
    func shortLived() {
        let held = Self.holdingToken(lifetime: .seconds(4))
        var machine = held.machine
        let t0 = held.t0
        guard case .resume(.success) = machine.request(id: 1, waiter: 1, now: t0 + .milliseconds(2900)) else {
            Issue.record("renewed before 3 s")
            return
        }
        guard case .resumeAndFetch = machine.request(id: 2, waiter: 2, now: t0 + .milliseconds(3100)) else {
            Issue.record("not renewed after 3 s")
            return
        }
        guard case .wait = machine.request(id: 3, waiter: 3, now: t0 + .milliseconds(3700)) else {
            Issue.record("an almost expired token was used")
            return
        }
    }

    @Test("50 sends answered 401 with the same token cause one renewal; a second 401 soon after is refused")
    func rejectedWithoutStorm() {
        let held = Self.holdingToken()
        var machine = held.machine
        let (first, t0) = (held.token, held.t0)
        for _ in 0..<50 {
            let retry = machine.reportRejected(generation: first.generation, now: t0 + .seconds(1))
            #expect(retry)
        }
        var fetches = 0
        for id in 1...50 {
            if case .waitAndFetch = machine.request(id: id, waiter: id, now: t0 + .seconds(1)) { fetches += 1 }
        }
        #expect(fetches == 1)
        let (second, waiters) = machine.fetchSucceeded(authorization: "Bearer b", lifetime: Self.hour, now: t0 + .seconds(2))
        #expect(waiters.count == 50)
        // A late 401 for the old token: the newer one is used, nothing renews.
        let lateRetry = machine.reportRejected(generation: first.generation, now: t0 + .seconds(3))
        #expect(lateRetry)
        guard case .resume(.success(let current)) = machine.request(id: 60, waiter: 60, now: t0 + .seconds(3)) else {
            Issue.record("a late 401 dropped the new token")
            return
        }
        #expect(current == second)
        // The renewed token refused too, within 30 s: no renewal loop; the caller reports refused credentials.
        let soonRetry = machine.reportRejected(generation: second.generation, now: t0 + .seconds(5))
        #expect(!soonRetry)
        let laterRetry = machine.reportRejected(generation: second.generation, now: t0 + .seconds(40))
        #expect(laterRetry)
    }

    @Test("a failing token endpoint: requests fail fast for a doubling backoff, then one tries again")
    func failureBackoff() {
        var machine = Machine(policy: Self.policy)
        let t0 = ContinuousClock.now
        _ = machine.request(id: 0, waiter: 0, now: t0)
        let waiters = machine.fetchFailed(FCMError(.tokenUnavailable, "503"), now: t0)
        #expect(waiters == [0])
        guard case .resume(.failure(let error)) = machine.request(id: 1, waiter: 1, now: t0 + .milliseconds(500)) else {
            Issue.record("no fail-fast inside the backoff")
            return
        }
        #expect(error.code == .tokenUnavailable)
        guard case .waitAndFetch = machine.request(id: 2, waiter: 2, now: t0 + .milliseconds(1100)) else {
            Issue.record("no new attempt after the backoff")
            return
        }
        _ = machine.fetchFailed(FCMError(.tokenUnavailable, "503"), now: t0 + .seconds(2))
        guard case .resume(.failure) = machine.request(id: 3, waiter: 3, now: t0 + .milliseconds(3900)) else {
            Issue.record("the backoff did not double")
            return
        }
        #expect(Self.policy.failureBackoff(consecutiveFailures: 10) == .seconds(30))
    }
}
