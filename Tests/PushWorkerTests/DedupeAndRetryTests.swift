import Foundation
import CallpushTestSupport
import Testing
@testable import PushWorker

@Suite struct Dedupe {
    let t0 = Date(timeIntervalSince1970: 1_795_262_400)

    @Test func secondInsertIsADuplicateAndReplayIsNot() {
        var store = DedupeStore()
        let key = DeliveryKey(callId: "c1", deviceKey: "d1", replay: 0)
        do { let inserted = store.insert(key, ringDeadline: t0); #expect(inserted) }
        do { let inserted = store.insert(key, ringDeadline: t0); #expect(!inserted) }
        do { let inserted = store.insert(DeliveryKey(callId: "c1", deviceKey: "d1", replay: 1), ringDeadline: t0); #expect(inserted, "a replay generation rings again") }
        do { let inserted = store.insert(DeliveryKey(callId: "c1", deviceKey: "d2", replay: 0), ringDeadline: t0); #expect(inserted, "another device of the call") }
    }

    @Test func entriesAreForgottenOnlyAfterDeadlinePlusRetention() {
        var store = DedupeStore(retention: .seconds(60))
        let key = DeliveryKey(callId: "c1", deviceKey: "d1", replay: 0)
        store.insert(key, ringDeadline: t0)
        store.expire(now: t0.addingTimeInterval(59))
        #expect(store.contains(key))
        store.expire(now: t0.addingTimeInterval(61))
        #expect(!store.contains(key))
    }

    @Test func capacityBoundsMemoryDroppingSoonestDeadlinesFirst() {
        var store = DedupeStore(capacity: 100)
        for i in 0..<150 {
            store.insert(DeliveryKey(callId: "c\(i)", deviceKey: "d", replay: 0), ringDeadline: t0.addingTimeInterval(Double(i)))
        }
        #expect(store.count == 100)
        #expect(store.evictedEarly == 50)
        #expect(store.contains(DeliveryKey(callId: "c149", deviceKey: "d", replay: 0)))
        #expect(!store.contains(DeliveryKey(callId: "c0", deviceKey: "d", replay: 0)))
    }
}


@Suite struct Retries {
    let now = Date(timeIntervalSince1970: 1_795_262_400)

    @Test func backoffIsJitteredWithinTheExponentialCeilingAndCapped() {
        let policy = RetryPolicy(base: .milliseconds(100), cap: .seconds(1), maxAttempts: 100)
        var random = SplitMix(state: 42)
        for attempt in 1...12 {
            let ceiling = min(1.0, 0.1 * pow(2, Double(attempt - 1)))
            var delays: [Double] = []
            for _ in 0..<200 {
                guard case .retry(let after) = policy.decide(afterAttempt: attempt, now: now, ringDeadline: now.addingTimeInterval(3600), using: &random) else {
                    Issue.record("expected a retry"); return
                }
                delays.append(after.seconds)
            }
            #expect(delays.allSatisfy { $0 >= 0 && $0 <= ceiling + 1e-9 })
            #expect(Set(delays).count > 100, "full jitter spreads retries")
        }
    }

    @Test func neverRetriesPastTheRingDeadline() {
        let policy = RetryPolicy(base: .seconds(2), cap: .seconds(2), maxAttempts: 10)
        var random = SplitMix(state: 1)
        for _ in 0..<500 {
            let deadline = now.addingTimeInterval(1)
            switch policy.decide(afterAttempt: 3, now: now, ringDeadline: deadline, using: &random) {
            case .retry(let after):
                #expect(now.addingTimeInterval(after.seconds) < deadline)
            case .expire:
                break
            case .giveUp:
                Issue.record("attempts were not exhausted")
            }
        }
        #expect(policy.decide(afterAttempt: 1, now: now, ringDeadline: now, using: &random) == .expire)
    }

    @Test func minimumDelayIsHonouredAndAttemptsAreBounded() {
        let policy = RetryPolicy(base: .milliseconds(1), cap: .milliseconds(1), maxAttempts: 3)
        var random = SplitMix(state: 7)
        #expect(policy.decide(afterAttempt: 1, now: now, ringDeadline: now.addingTimeInterval(60), minimumDelay: .seconds(5), using: &random) == .retry(after: .seconds(5)))
        #expect(policy.decide(afterAttempt: 3, now: now, ringDeadline: now.addingTimeInterval(60), using: &random) == .giveUp)
    }
}
