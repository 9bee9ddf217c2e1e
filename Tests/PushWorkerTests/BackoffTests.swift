import CallpushTestSupport
import Locking
import Testing

/// `Backoff` (Locking): the one rule behind ring retries (`RetryPolicy`), the APNs client's
/// reconnects and the FCM client's token renewals after a failure.
@Suite struct BackoffRule {
    @Test func theCeilingDoublesFromTheBaseAndStopsAtTheCap() {
        let backoff = Backoff(base: .milliseconds(100), cap: .seconds(2))
        let ceilings = (1...7).map { backoff.ceiling(afterFailures: $0) }
        #expect(ceilings == [100, 200, 400, 800, 1600, 2000, 2000].map { Duration.milliseconds($0) })
        #expect(backoff.ceiling(afterFailures: 0) == .milliseconds(100), "no failure yet counts as the first")
        #expect(backoff.ceiling(afterFailures: 10_000) == .seconds(2))
        #expect(Backoff(base: .seconds(5), cap: .seconds(1)).ceiling(afterFailures: 1) == .seconds(1), "a base above the cap is capped")
    }

    @Test func aHugeBaseIsCappedInsteadOfOverflowing() {
        let backoff = Backoff(base: .seconds(Int64.max / 2), cap: .seconds(Int64.max / 2))
        #expect(backoff.ceiling(afterFailures: 40) == .seconds(Int64.max / 2))
    }

    @Test func delaysSpreadOverTheWholeRangeUpToTheCeiling() {
        let backoff = Backoff(base: .milliseconds(100), cap: .seconds(1))
        var random = SplitMix(state: 11)
        for failures in 1...6 {
            let ceiling = backoff.ceiling(afterFailures: failures)
            let delays = (0..<1_000).map { _ in backoff.delay(afterFailures: failures, using: &random) }
            #expect(delays.allSatisfy { $0 >= .zero && $0 <= ceiling })
            #expect(delays.contains { $0 < ceiling / 10 } && delays.contains { $0 > ceiling * 0.9 }, "full jitter reaches both ends")
            #expect(Set(delays).count > 990)
        }
    }
}
