import CallContract
import CallpushCore
import CallpushTestSupport
import Foundation
import Kafka
import Locking
import Logging
import Testing
@testable import PushWorker

/// The ring guarantees under the everyday conditions the worker review found (worker.md): each
/// test reproduces one finding.
@Suite struct DeliveryGuarantees {
    let t0 = Date(timeIntervalSince1970: 1_795_262_400)

    /// H3: a full store evicts in O(log n), not with a sort of the whole store per insert.
    @Test func insertsIntoAFullDedupeStoreDoNotSortTheStore() {
        var store = DedupeStore(capacity: 200_000)
        for i in 0..<200_000 {
            store.insert(DeliveryKey(callId: "c\(i)", deviceKey: "d", replay: 0), ringDeadline: t0.addingTimeInterval(Double(i)))
        }
        let start = ContinuousClock.now
        for i in 0..<2_000 {
            store.insert(DeliveryKey(callId: "n\(i)", deviceKey: "d", replay: 0), ringDeadline: t0.addingTimeInterval(1e6))
        }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .seconds(1), "2,000 inserts into a full 200,000-entry store took \(elapsed)")
        #expect(store.count == 200_000)
        #expect(store.evictedEarly == 2_000)
        #expect(!store.contains(DeliveryKey(callId: "c1999", deviceKey: "d", replay: 0)), "the soonest deadlines went first")
        #expect(store.contains(DeliveryKey(callId: "c2000", deviceKey: "d", replay: 0)))
        #expect(store.contains(DeliveryKey(callId: "n1999", deviceKey: "d", replay: 0)))
    }

    /// H6: a sandbox device refused with `BadEnvironmentKeyInToken` does not suspend the app's
    /// production pushes.
    @Test func anEnvironmentRefusalForOneDeviceDoesNotSuspendTheOtherEnvironment() async throws {
        let h = Harness(credentials: CredentialCircuit(initialCoolDown: .seconds(60)))
        let sandbox = makeRing(token: hexToken(0x5a), environment: .sandbox)
        h.sender.script(sandbox.device.token, [PushAttempt(disposition: .credentialsInvalid, status: 403, reason: "BadEnvironmentKeyInToken")])
        #expect(try await h.process(.ring(sandbox)) == .finished(.failed))
        let production = makeRing(token: hexToken(0x9f), environment: .production)
        #expect(try await h.process(.ring(production), offset: 101) == .finished(.sent))
        #expect(h.sender.sent.count == 2, "the production ring was pushed")
        // The sandbox environment of the app stays suspended: the next sandbox ring is not pushed.
        #expect(try await h.process(.ring(makeRing(token: hexToken(0x5b), environment: .sandbox)), offset: 102) == .finished(.failed))
        #expect(h.sender.sent.count == 2)
        #expect(h.publisher.statuses.last?.error?.code == DeliveryProcessor.suspendedCode)
    }

    /// M4: a cancel taken in while the `retrying` write after ExpiredProviderToken is in progress wins.
    @Test func aCancelDuringTheRetryAfterAnExpiredProviderTokenWins() async throws {
        let h = Harness(publisher: RecordingPublisher(failFirst: 3))  // the retrying write takes ~350 ms
        let ring = makeRing()
        h.sender.script(ring.device.token, [.expiredProviderToken, .ok])
        let delivery = Task { try await h.process(.ring(ring)) }
        try await Task.sleep(for: .milliseconds(100))
        let cancel = CallRequest.cancel(CancelRequest(callId: ring.callId, requestedAt: Date()))
        _ = h.processor.intake(InboundEvent(partition: 3, offset: 101, key: Array(ring.callId.utf8), value: Array(try cancel.encoded())))
        #expect(try await delivery.value == .finished(.cancelled))
        #expect(h.sender.sent.count == 1, "no second push after the cancel")
    }

    /// M4: a provider token that keeps expiring is a credentials failure: the app is suspended
    /// instead of every call spending two pushes.
    @Test func aPersistentExpiredProviderTokenSuspendsTheAppLikeOtherCredentialRefusals() async throws {
        let h = Harness(sender: ScriptedSender(fallback: .expiredProviderToken),
                        credentials: CredentialCircuit(initialCoolDown: .seconds(60)))
        for offset in 100..<110 {
            #expect(try await h.process(.ring(makeRing()), offset: Int64(offset)) == .finished(.failed))
        }
        #expect(h.sender.sent.count <= 2, "\(h.sender.sent.count) pushes for 10 calls")
        #expect(h.publisher.statuses.last?.error?.code == DeliveryProcessor.suspendedCode)
    }

    /// M5: label values of the deliveries counter are bounded by the configured apps plus `unknown`.
    @Test func ringsForUnknownAppsDoNotGrowTheMetricLabels() async throws {
        let h = Harness()
        let metrics = WorkerMetrics()
        var processor = h.processor
        processor.metrics = metrics
        for i in 0..<200 {
            let ring = CallRequest.ring(makeRing(app: "x\(i)"))
            let event = InboundEvent(partition: 0, offset: Int64(i), key: Array(ring.callId.utf8), value: Array(try ring.encoded()))
            #expect(await processor.process(event) == .finished(.rejected))
        }
        let series = metrics.exposition().split(separator: "\n").filter { $0.hasPrefix("callpush_worker_deliveries_total{") }
        #expect(series.count == 1, "\(series.count) series")
        #expect(series.first?.contains(#"app="unknown""#) == true)
    }

    /// M5: the suspension gauge reads 1 while a probe is in flight (the other deliveries are still held).
    @Test func anAppProbingItsCredentialsStillReadsSuspended() {
        let circuit = CredentialCircuit(initialCoolDown: .seconds(10))
        circuit.record(.init(app: "rider", environment: .production), .refused(reason: "InvalidProviderToken"), probe: false, now: t0)
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(11)) == .probe)
        #expect(circuit.suspendedApps(now: t0.addingTimeInterval(11)).contains("rider"))
    }
}

func makeRing(token: String, environment: APNSEnvironment, app: String = "rider") -> RingRequest {
    var ring = makeRing(token: token, app: app)
    ring.device.environment = environment
    return ring
}

/// The partition coordinator's side of the guarantees: assignment, revoke bounds, bounded offsets.
@Suite struct CoordinatorGuarantees {
    typealias Stores = PartitionCoordinatorTests.Stores

    /// A status history whose rebuild waits for `gate` (a slow assignment) and reports `cancels`.
    struct SlowHistory: StatusHistoryRebuilding {
        let gate: PartitionCoordinatorTests.Gate
        let started: Locked<Bool>
        var cancels: [String] = []

        func rebuild(partitions: [Int32], now: Date, handled: (Int32, DeliveryKey, Date) -> Void,
                     cancelled: (Int32, String, Date) -> Void) async -> [Int32: StatusHistoryCoverage] {
            started.withLock { $0 = true }
            await gate.pass()
            for callId in cancels { cancelled(partitions[0], callId, now) }
            return Dictionary(uniqueKeysWithValues: partitions.map { ($0, .complete) })
        }
    }

    func event(_ offset: Int64) -> InboundEvent { InboundEvent(partition: 0, offset: offset, key: nil, value: []) }

    /// Starts assigning partition 0, whose rebuild `history` holds at its gate, and a message of it
    /// meanwhile, which must wait. Returns the assignment and the message's wait for it to settle.
    func assigningWithAWaitingMessage(_ coordinator: PartitionCoordinator, _ history: SlowHistory, offset: Int64)
        async throws -> (assigning: Task<Void, Never>, settled: Task<Void, Never>)? {
        let assigning = Task { await coordinator.assigned([0]) }
        while !history.started.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        guard case .waitForAssignment = coordinator.startOne(event(offset), { _ in .finished(.sent) }) else {
            Issue.record("a message of a partition being set up must wait")
            return nil
        }
        return (assigning, Task { await coordinator.assignmentSettled(0) })
    }

    /// H1: a message of a partition whose assignment is still being set up (the rebuild overran the
    /// Kafka layer's bound) is neither dropped nor stored past: it waits, then is begun.
    @Test func aMessageThatArrivesWhileItsAssignmentIsSetUpWaitsAndIsBegun() async throws {
        let stores = Stores()
        let gate = PartitionCoordinatorTests.Gate()
        let history = SlowHistory(gate: gate, started: Locked(false), cancels: ["cancelled-call"])
        let cancels = CancelSignals()
        let coordinator = PartitionCoordinator(dedupe: PartitionDedupe(retention: .seconds(60), capacity: 100), history: history,
                                               drainTimeout: .milliseconds(50),
                                               storeOffset: { _, offset in stores.record(offset) }, pause: { _, _ in },
                                               cancels: cancels, logger: Logger(label: "t"))
        guard case let (assigning, settled)? = try await assigningWithAWaitingMessage(coordinator, history, offset: 100) else { return }
        gate.open()
        await assigning.value
        await settled.value
        guard case .started(let task) = coordinator.startOne(event(100), { _ in .finished(.sent) }) else {
            Issue.record("not begun after the assignment settled")
            return
        }
        _ = await task.value
        #expect(stores.all == [101])
        #expect(cancels.isCancelled("cancelled-call"), "cancels are rebuilt with the partition")
    }

    /// A message waiting for its partition's assignment is let go when the partition is revoked
    /// before the assignment settled: it is stale then, and the consume loop must not hang on it.
    @Test func aMessageWaitingForAnAssignmentThatIsRevokedIsStale() async throws {
        let gate = PartitionCoordinatorTests.Gate()
        let history = SlowHistory(gate: gate, started: Locked(false))
        let coordinator = PartitionCoordinator(dedupe: PartitionDedupe(retention: .seconds(60), capacity: 100), history: history,
                                               drainTimeout: .milliseconds(50),
                                               storeOffset: { _, _ in }, pause: { _, _ in },
                                               logger: Logger(label: "t"))
        guard case let (assigning, settled)? = try await assigningWithAWaitingMessage(coordinator, history, offset: 7) else { return }
        await coordinator.revoked([0])
        await settled.value
        guard case .stale = coordinator.startOne(event(7), { _ in .finished(.sent) }) else {
            Issue.record("a message of a revoked partition must be stale")
            return
        }
        gate.open()
        await assigning.value
        #expect(coordinator.owned.isEmpty, "the voided assignment is not installed")
    }

    /// M3: a revoke ends within drain + leftover bound even when a delivery ignores cancellation.
    @Test func aRevokeEndsWithinItsBoundWhateverADeliveryDoes() async throws {
        let coordinator = PartitionCoordinator(dedupe: PartitionDedupe(retention: .seconds(60), capacity: 100), history: nil,
                                               drainTimeout: .milliseconds(50),
                                               storeOffset: { _, _ in }, pause: { _, _ in },
                                               leftoverBound: .milliseconds(200), logger: Logger(label: "t"))
        await coordinator.assigned([0])
        let gate = PartitionCoordinatorTests.Gate()
        guard case .started(let stuck) = coordinator.startOne(event(5), { run in
            _ = coordinator.beginWork(run)
            await gate.pass()  // ignores cancellation, like a status write that never returns
            return .finished(.sent)
        }) else { Issue.record("not started"); return }
        await coordinator.revoked([0])
        #expect(coordinator.owned.isEmpty, "the revoke ended while the delivery still runs")
        gate.open()
        _ = await stuck.value
    }

    /// M2 (coordinator side): deliveries still waiting for an in-flight slot are handed back at once
    /// by a revoke; the ones at work get the drain bound.
    @Test func aRevokeHandsBackDeliveriesThatHaveNotBegunWork() async throws {
        let coordinator = PartitionCoordinator(dedupe: PartitionDedupe(retention: .seconds(60), capacity: 100), history: nil,
                                               drainTimeout: .seconds(60), storeOffset: { _, _ in }, pause: { _, _ in }, logger: Logger(label: "t"))
        await coordinator.assigned([0])
        let limiter = InFlightLimiter(limit: 1)
        let gate = PartitionCoordinatorTests.Gate()
        let work: @Sendable (DeliveryRun) async -> DeliveryResult = { run in
            guard await limiter.acquire() else { return .handedBack }
            defer { limiter.release() }
            guard coordinator.beginWork(run) else { return .handedBack }
            await gate.pass()
            return .finished(.sent)
        }
        guard case .started(let working) = coordinator.startOne(event(1), work),
              case .started(let waiting) = coordinator.startOne(event(2), work) else { Issue.record("not started"); return }
        while coordinator.inFlightCount < 1 { try await Task.sleep(for: .milliseconds(5)) }
        let revoke = Task { await coordinator.revoked([0]) }
        let waitingResult = await waiting.value
        #expect(waitingResult == .handedBack)
        gate.open()
        let workingResult = await working.value
        #expect(workingResult == .finished(.sent), "the delivery at work was let finish")
        await revoke.value
    }

    /// The offset tracker stays bounded: a partition whose begun-but-unstored offsets reach the bound
    /// behind an unfinished delivery is paused, and resumed once they are down to half.
    @Test func aPartitionHeldBackByAStuckDeliveryIsPausedThenResumed() async throws {
        let pauses = Locked<[Bool]>([])
        let coordinator = PartitionCoordinator(dedupe: PartitionDedupe(retention: .seconds(60), capacity: 100), history: nil,
                                               drainTimeout: .milliseconds(50),
                                               storeOffset: { _, _ in }, pause: { _, paused in pauses.withLock { $0.append(paused) } },
                                               pauseAfter: 10, logger: Logger(label: "t"))
        await coordinator.assigned([0])
        let gate = PartitionCoordinatorTests.Gate()
        guard case .started(let head) = coordinator.startOne(event(0), { _ in await gate.pass(); return .finished(.sent) }) else { return }
        var rest: [Task<DeliveryResult, Never>] = []
        for offset in 1..<12 as Range<Int64> {
            if case .started(let task) = coordinator.startOne(event(offset), { _ in .finished(.sent) }) { rest.append(task) }
        }
        for task in rest { _ = await task.value }
        #expect(pauses.withLock { $0 } == [true])
        gate.open()
        _ = await head.value
        #expect(pauses.withLock { $0 } == [true, false])
    }
}

@Suite struct OutcomeWriteGuarantees {
    /// A publisher whose status topic refuses every status for good (e.g. its partition does not exist).
    final class RefusingStatuses: OutcomePublishing {
        struct Refused: Error {}
        let dlq = Locked<[[String: String]]>([])
        func publish(status: CallStatus, partition: Int32, within bound: Duration?) async throws { throw Refused() }
        func deadLetter(key: [UInt8]?, value: [UInt8], headers: [(String, String)], within bound: Duration?) async throws {
            dlq.withLock { $0.append(Dictionary(headers, uniquingKeysWith: { a, _ in a })) }
        }
        func classify(_ error: any Error) -> OutcomeWriteFailure { .permanent(code: "_UNKNOWN_PARTITION") }
    }

    /// H2: a status the topic will never take ends the delivery — the event goes to the DLQ with
    /// `status-unwritable` — instead of retrying for ever.
    @Test func aStatusTheTopicRefusesForGoodSendsTheEventToTheDLQ() async throws {
        let publisher = RefusingStatuses()
        let sender = ScriptedSender()
        let processor = DeliveryProcessor(
            settings: .init(workerID: "w", apps: ["rider"]), sender: sender, publisher: publisher, cancels: CancelSignals(),
            dedupe: PartitionDedupe(retention: .seconds(60), capacity: 100), ackTokens: try AckTokenSigner(secret: testSecret),
            logger: Logger(label: "t"))
        let ring = CallRequest.ring(makeRing())
        let result = await processor.process(InboundEvent(partition: 0, offset: 7, key: nil, value: Array(try ring.encoded())))
        #expect(result == .finished(.sent))
        #expect(publisher.dlq.withLock { $0 }.map { $0[DeadLetterHeader.error] } == [DeliveryProcessor.statusUnwritableCode])
    }

    /// M3: a delivery handed back after APNs accepted its push keeps its dedupe entry: the event
    /// coming again is a duplicate, not a second ring.
    @Test func aDeliveryHandedBackAfterItsPushWasAcceptedIsNotPushedAgain() async throws {
        let h = Harness(publisher: RecordingPublisher(failFirst: 1_000), outcomeWriteBound: .milliseconds(100))
        let ring = makeRing()
        let task = Task { try await h.process(.ring(ring)) }
        while h.sender.sent.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        task.cancel()
        #expect(try await task.value == .handedBack, "the status could not be written within the bound")
        h.publisher.heal()
        #expect(try await h.process(.ring(ring), offset: 101) == .finished(.duplicate))
        #expect(h.sender.sent.count == 1, "pushed once")
    }

    /// L3: the cancel memory has a hard cap.
    @Test func theCancelMemoryIsBounded() {
        let cancels = CancelSignals(capacity: 100)
        let t0 = Date()
        for i in 0..<150 { cancels.cancel(callId: "c\(i)", forgetAfter: t0.addingTimeInterval(Double(i))) }
        #expect(cancels.count == 100)
        #expect(cancels.evicted == 50)
        #expect(cancels.isCancelled("c149") && !cancels.isCancelled("c0"))
    }

    /// `/readyz` and `/healthz` follow failing writes and incomplete dedupe state.
    @Test func healthReflectsFailingWritesStallsAndPartialRebuilds() {
        var bounds = WorkerHealth.Bounds()
        bounds.writeFailureBound = .seconds(30)
        bounds.stallBound = .seconds(300)
        bounds.unhealthyAfter = .seconds(600)
        let health = WorkerHealth(bounds: bounds)
        let t0 = ContinuousClock.now
        #expect(health.report(owned: 2, oldestUnfinished: [:], clock: t0).ready)
        #expect(!health.report(owned: 0, oldestUnfinished: [:], clock: t0).ready)
        health.recordWrite(succeeded: false, at: t0)
        #expect(health.report(owned: 2, oldestUnfinished: [:], clock: t0 + .seconds(10)).ready)
        let failing = health.report(owned: 2, oldestUnfinished: [:], clock: t0 + .seconds(31))
        #expect(!failing.ready && failing.live)
        #expect(!health.report(owned: 2, oldestUnfinished: [:], clock: t0 + .seconds(601)).live)
        health.recordWrite(succeeded: true, at: t0 + .seconds(602))
        #expect(health.report(owned: 2, oldestUnfinished: [:], clock: t0 + .seconds(603)).ready)
        let stalled = health.report(owned: 2, oldestUnfinished: [3: .seconds(400)], clock: t0 + .seconds(603))
        #expect(!stalled.ready && stalled.live)
        health.setDedupeCoverage(partition: 1, incompleteUntil: Date().addingTimeInterval(60))
        #expect(!health.report(owned: 2, oldestUnfinished: [:], clock: t0 + .seconds(603)).ready)
        health.retain(partitions: [0])
        #expect(health.report(owned: 2, oldestUnfinished: [:], clock: t0 + .seconds(603)).ready)
    }
}
