import Foundation
import Locking
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

    @Test func aDuplicateKeepsTheLaterOfTheTwoExpiriesAndEvictsNothing() {
        var store = DedupeStore(retention: .seconds(60), capacity: 2)
        let key = DeliveryKey(callId: "c1", deviceKey: "d1", replay: 0)
        let other = DeliveryKey(callId: "c2", deviceKey: "d1", replay: 0)
        store.insert(key, ringDeadline: t0.addingTimeInterval(100))
        store.insert(other, ringDeadline: t0)
        // Full: a duplicate makes no room (nothing is evicted) and an earlier deadline does not shorten the memory.
        do { let inserted = store.insert(key, ringDeadline: t0); #expect(!inserted) }
        #expect(store.evictedEarly == 0)
        #expect(store.count == 2)
        store.expire(now: t0.addingTimeInterval(159))
        #expect(store.contains(key))
        #expect(!store.contains(other))
        // A later deadline lengthens it.
        do { let inserted = store.insert(key, ringDeadline: t0.addingTimeInterval(200)); #expect(!inserted) }
        store.expire(now: t0.addingTimeInterval(161))
        #expect(store.contains(key))
        store.expire(now: t0.addingTimeInterval(261))
        #expect(!store.contains(key))
        #expect(store.count == 0)
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

/// The worker's dedupe memory as a whole: one bound across all the partitions it owns, so a
/// backlog spread over many partitions cannot grow it past `CALLPUSH_DEDUPE_CAPACITY`.
@Suite struct DedupeAcrossPartitions {
    let t0 = Date(timeIntervalSince1970: 1_795_262_400)

    func key(_ i: Int) -> DeliveryKey { DeliveryKey(callId: "c\(i)", deviceKey: "d", replay: 0) }

    @Test func theTotalHoldsAcrossPartitionsForgettingTheOldestFirst() {
        let dedupe = PartitionDedupe(retention: .seconds(60), capacity: 1_000)
        // 40 partitions, 3,000 deliveries in deadline order: three times the total, 75 per partition
        // (each partition alone well under the bound).
        for i in 0..<3_000 {
            let inserted = dedupe.store(for: Int32(i % 40)).insert(key(i), ringDeadline: t0.addingTimeInterval(Double(i)))
            #expect(inserted)
        }
        #expect(dedupe.count == 1_000)
        #expect(dedupe.evictions == 2_000)
        let remembered = (0..<3_000).filter { dedupe.store(for: Int32($0 % 40)).contains(key($0)) }
        // The oldest 2,000 forgotten, the newest 1,000 kept.
        #expect(remembered.count == 1_000)
        #expect(remembered.first == 2_000)
        #expect(remembered.last == 2_999)
        // The newest are still deduplicated.
        let again = dedupe.store(for: Int32(2_999 % 40)).insert(key(2_999), ringDeadline: t0.addingTimeInterval(2_999))
        #expect(!again)
    }

    @Test func aRevokedPartitionsEntriesAreReleased() {
        let dedupe = PartitionDedupe(retention: .seconds(60), capacity: 1_000)
        for i in 0..<1_000 {
            _ = dedupe.store(for: Int32(i % 10)).insert(key(i), ringDeadline: t0.addingTimeInterval(Double(i)))
        }
        #expect(dedupe.count == 1_000)
        dedupe.remove(partitions: [0, 1, 2, 3, 4])
        #expect(dedupe.count == 500)
        // The room is free for the partitions still owned: nothing of theirs is evicted.
        for i in 1_000..<1_500 {
            _ = dedupe.store(for: 10).insert(key(i), ringDeadline: t0.addingTimeInterval(Double(i)))
        }
        #expect(dedupe.count == 1_000)
        #expect(dedupe.evictions == 0)
        #expect((0..<1_000).filter { $0 % 10 >= 5 }.allSatisfy { dedupe.store(for: Int32($0 % 10)).contains(key($0)) })
    }

    @Test func rebuiltStoresCountTowardTheTotal() {
        let dedupe = PartitionDedupe(retention: .seconds(60), capacity: 1_000)
        for partition in Int32(0)..<3 {
            var store = dedupe.makeStore()
            for i in 0..<600 {
                store.remember(key(Int(partition) * 1_000 + i), until: t0.addingTimeInterval(Double(Int(partition) * 1_000 + i)))
            }
            dedupe.install(store, partition: partition)
        }
        #expect(dedupe.count == 1_000)
        #expect(dedupe.store(for: 2).contains(key(2_599)))
        #expect(!dedupe.store(for: 0).contains(key(599)), "partition 0's deliveries are the oldest")
    }

    /// Memory follows what is remembered: a store that remembered many deliveries and forgot them
    /// gives the room back (a Swift dictionary or array never shrinks by itself).
    @Test func aStoreThatForgetsMostOfItsEntriesGivesItsRoomBack() {
        var store = DedupeStore(retention: .seconds(60), capacity: 100_000)
        for i in 0..<100_000 { store.insert(key(i), ringDeadline: t0.addingTimeInterval(Double(i))) }
        let full = store.reservedSlots
        store.expire(now: t0.addingTimeInterval(60 + 99_990))
        #expect(store.count == 10)
        #expect(store.reservedSlots < full / 16, "\(store.reservedSlots) slots kept of \(full)")
        #expect(store.contains(key(99_999)))
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
                delays.append(after.inSeconds)
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
                #expect(now.addingTimeInterval(after.inSeconds) < deadline)
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
