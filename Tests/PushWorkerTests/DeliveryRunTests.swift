import CallContract
import CallpushCore
import CallpushTestSupport
import Foundation
import Locking
import Logging
import Testing

@testable import PushWorker

/// Deliveries taken a run at a time (one partition's consecutive events, one task): each event
/// still gets its own outcome, and its offset may be stored only once that outcome is durable.
@Suite("Delivery runs", .timeLimit(.minutes(1)))
struct DeliveryRunTests {
    /// What `process(run:)` reported for each event, with the statuses already written by then.
    final class Reports: Sendable {
        struct Report: Sendable { var result: DeliveryResult; var writtenThen: [CallStatus] }
        private let state = Locked<[Int: [Report]]>([:])
        func record(_ index: Int, _ result: DeliveryResult, written: [CallStatus]) {
            state.withLock { $0[index, default: []].append(Report(result: result, writtenThen: written)) }
        }
        var all: [Int: [Report]] { state.withLock { $0 } }
    }

    private func event(_ request: CallRequest, offset: Int64) throws -> InboundEvent {
        InboundEvent(partition: 0, offset: offset, key: Array(request.callId.utf8), value: Array(try request.encoded()))
    }

    private func run(_ h: Harness, _ events: [InboundEvent]) async -> Reports {
        let items = events.map { (intake: h.processor.intake($0), event: $0) }
        let reports = Reports()
        let publisher = h.publisher
        await h.processor.process(run: items) { ended in
            let written = publisher.statuses + publisher.cancelMarkers
            for (index, result) in ended { reports.record(index, result, written: written) }
        }
        return reports
    }

    @Test("a run's rings each get their own outcome — retried then sent, duplicate, cancelled, rejected — reported only once it is written")
    func eachEventOfARunGetsItsOwnDurableOutcome() async throws {
        let h = Harness()
        let retried = makeRing(token: String(repeating: "0a", count: 32))
        h.sender.script(retried.device.token, [.unavailable])
        let plain = makeRing(token: String(repeating: "0b", count: 32))
        let cancelled = makeRing(token: String(repeating: "0c", count: 32))
        let events = [
            try event(.ring(retried), offset: 10),
            try event(.ring(plain), offset: 11),
            try event(.ring(plain), offset: 12),  // the same delivery again: a duplicate
            try event(.cancel(CancelRequest(callId: cancelled.callId, requestedAt: Date())), offset: 13),
            try event(.ring(cancelled), offset: 14),
            InboundEvent(partition: 0, offset: 15, key: Array("call-x".utf8), value: Array("{not json".utf8)),
        ]
        let reports = await run(h, events).all

        let expected: [DeliveryResult] = [.finished(.sent), .finished(.sent), .finished(.duplicate), .finished(.cancelled),
                                          .finished(.cancelled), .finished(.rejected)]
        #expect(reports.keys.sorted() == Array(events.indices), "every event of the run is reported")
        for (index, outcome) in expected.enumerated() {
            let report = reports[index] ?? []
            #expect(report.map(\.result) == [outcome], "event \(index) reported once, as \(outcome)")
        }
        // Reported only after its own outcome was durable: the caller stores the offset then.
        func written(_ index: Int, _ callId: String, _ state: CallStatus.State) -> Bool {
            reports[index]?.first?.writtenThen.contains { $0.callId == callId && $0.state == state } ?? false
        }
        #expect(written(0, retried.callId, .sent))
        #expect(written(1, plain.callId, .sent))
        #expect(written(2, plain.callId, .duplicate))
        #expect(written(4, cancelled.callId, .cancelled))
        #expect(written(5, "call-x", .rejected))
        #expect(h.publisher.statuses.filter { $0.callId == retried.callId }.map(\.state) == [.retrying, .sent])
        #expect(h.sender.sent.filter { $0.push.deviceToken == plain.device.token }.count == 1, "the duplicate is not pushed")
        #expect(!h.sender.sent.contains { $0.push.deviceToken == cancelled.device.token }, "the cancelled call is not pushed")
        #expect(h.publisher.deadLetters.count == 1, "the invalid event is kept in the DLQ")
    }

    @Test("statuses of a run that the topic refused at first are written again; each ring is reported only once written")
    func refusedStatusWritesOfARunAreRetried() async throws {
        let h = Harness(publisher: RecordingPublisher(failFirst: 3))
        let rings = (0..<6).map { makeRing(token: String(repeating: "1\($0)", count: 32)) }
        let events = try rings.enumerated().map { try event(.ring($1), offset: Int64($0)) }
        let reports = await run(h, events).all

        for (index, ring) in rings.enumerated() {
            #expect(reports[index]?.map(\.result) == [.finished(.sent)])
            #expect(reports[index]?.first?.writtenThen.contains { $0.callId == ring.callId && $0.state == .sent } == true,
                    "ring \(index) reported after its status was written")
        }
        #expect(h.publisher.states == Array(repeating: .sent, count: rings.count), "one status per ring")
        #expect(h.sender.sent.count == rings.count, "a failed status write does not push again")
    }

    /// A sender that answers every push at once, except the one to `heldToken`, which it answers
    /// (as sent) only once the test opens `release`.
    final class HoldingSender: VoIPPushSending {
        let heldToken: String
        /// What the held push is answered once released.
        let heldAnswer: PushAttempt.Disposition
        let release = PartitionCoordinatorTests.Gate()
        private let holding = Locked(false)
        private let cancelled = Locked(false)
        init(heldToken: String, heldAnswer: PushAttempt.Disposition = .sent) {
            self.heldToken = heldToken
            self.heldAnswer = heldAnswer
        }
        /// The held push has reached the sender.
        var isHolding: Bool { holding.withLock { $0 } }
        /// The task sending the held push was cancelled while it was held.
        var wasCancelled: Bool { cancelled.withLock { $0 } }
        func send(_ push: VoIPPush) async -> PushAttempt {
            if push.deviceToken == heldToken {
                holding.withLock { $0 = true }
                // Like a request already on the wire: cancelling the caller does not take it back.
                await withTaskCancellationHandler { await release.pass() } onCancel: { cancelled.withLock { $0 = true } }
                return PushAttempt(disposition: heldAnswer, status: heldAnswer == .sent ? 200 : 500, apnsID: push.apnsID)
            }
            return PushAttempt(disposition: .sent, status: 200, apnsID: push.apnsID)
        }
    }

    @Test("a revoke past the drain bound cancels a run with a push unanswered: the rings answered before keep their stored offsets; a late answer that rang the phone is still written, one that did not is handed back to be pushed again",
          arguments: [PushAttempt.Disposition.sent, .retry])
    func revokeCancelsARunWithAPushUnanswered(lateAnswer: PushAttempt.Disposition) async throws {
        let rings = (0..<3).map { makeRing(token: String(repeating: "3\($0)", count: 32)) }
        let held = rings[2]
        let sender = HoldingSender(heldToken: held.device.token, heldAnswer: lateAnswer)
        let publisher = RecordingPublisher()
        let dedupe = PartitionDedupe(retention: .seconds(60), capacity: 100)
        let processor = DeliveryProcessor(
            settings: DeliveryProcessor.Settings(workerID: "test-worker", apps: ["rider"], retry: RetryPolicy(),
                                                 attemptTimeout: TestTiming.scaled(.seconds(2))),
            sender: sender, publisher: publisher, cancels: CancelSignals(), dedupe: dedupe,
            ackTokens: try AckTokenSigner(secret: testSecret), credentials: CredentialCircuit(),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let events = try rings.enumerated().map { try event(.ring($1), offset: Int64($0)) }
        let stores = Stores()
        let coordinator = await assignedCoordinator(storingInto: stores, drainTimeout: .milliseconds(50), leftoverBound: .seconds(3600))
        let results = Locked<[Int: DeliveryResult]>([:])
        guard case .started = coordinator.start(run: events, { run in
            guard coordinator.beginWork(run) else { return }
            let items = events.map { (intake: processor.intake($0), event: $0) }
            await processor.process(run: items) { ended in
                results.withLock { for (index, result) in ended { $0[index] = result } }
                run.finish(ended)
            }
        }) else { Issue.record("run not started"); return }

        try await withTimeout("the quick rings stored", seconds: 30) {
            while stores.all.last != 2 || !sender.isHolding { try await Task.sleep(for: .milliseconds(5)) }
        }
        let revoke = Task { await coordinator.revoked([0]) }
        try await withTimeout("the run cancelled past the drain bound", seconds: 30) {
            while !sender.wasCancelled { try await Task.sleep(for: .milliseconds(5)) }
        }
        sender.release.open()  // the answer arrives after the cancel
        await revoke.value

        let heldStates = publisher.statuses.filter { $0.callId == held.callId }.map(\.state)
        let key = DeliveryKey(callId: held.callId, deviceKey: DeviceKey.make(token: held.device.token), replay: held.replay)
        if lateAnswer == .sent {
            #expect(heldStates == [.sent], "the phone rang: its status is written even though the run was cancelled")
            #expect(results.withLock { $0[2] } == .finished(.sent))
            #expect(stores.all.last == 3, "its offset is stored: the next owner does not ring it again")
            #expect(dedupe.store(for: 0).contains(key), "a copy seen again is answered duplicate")
        } else {
            #expect(!heldStates.contains { $0.isTerminal }, "no outcome for a ring that did not ring")
            #expect(results.withLock { $0[2] } == .handedBack)
            #expect(stores.all.last == 2, "its offset stays unstored: the next owner pushes it")
            #expect(!dedupe.store(for: 0).contains(key), "a copy seen again is pushed, not answered duplicate")
        }
        for index in 0..<2 {
            #expect(publisher.statuses.filter { $0.callId == rings[index].callId }.map(\.state) == [.sent])
        }
    }

    @Test("a run's rings answered at once have their statuses written and their offsets stored while a slow push of the run is still unanswered")
    func quickAnswersOfARunDoNotWaitForASlowOne() async throws {
        let rings = (0..<4).map { makeRing(token: String(repeating: "2\($0)", count: 32)) }
        let slow = rings[3]
        let sender = HoldingSender(heldToken: slow.device.token)
        let publisher = RecordingPublisher()
        var settings = DeliveryProcessor.Settings(workerID: "test-worker", apps: ["rider"], retry: RetryPolicy(),
                                                  attemptTimeout: TestTiming.scaled(.seconds(2)))
        settings.outcomeWriteBound = .seconds(10)
        let processor = DeliveryProcessor(
            settings: settings, sender: sender, publisher: publisher, cancels: CancelSignals(),
            dedupe: PartitionDedupe(retention: .seconds(60), capacity: 100), ackTokens: try AckTokenSigner(secret: testSecret),
            credentials: CredentialCircuit(), logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let events = try rings.enumerated().map { try event(.ring($1), offset: Int64($0)) }

        // The run goes through the coordinator as in the worker: a ring's offset is stored once it is reported.
        let stores = Stores()
        let coordinator = await assignedCoordinator(storingInto: stores)
        let reports = Reports()
        guard case .started = coordinator.start(run: events, { run in
            guard coordinator.beginWork(run) else { return }
            let items = events.map { (intake: processor.intake($0), event: $0) }
            await processor.process(run: items) { ended in
                let written = publisher.statuses
                for (index, result) in ended { reports.record(index, result, written: written) }
                run.finish(ended)
            }
        }) else { Issue.record("run not started"); return }

        // A safety bound only: the quick rings are expected at once, the slow one is held by the gate.
        let bound = ContinuousClock.now + .seconds(30)
        while reports.all.count < 3 || !sender.isHolding, ContinuousClock.now < bound { try await Task.sleep(for: .milliseconds(5)) }
        let early = reports.all
        #expect(early.keys.sorted() == [0, 1, 2], "the quick rings are reported while the slow push is unanswered")
        for index in 0..<3 {
            #expect(early[index]?.map(\.result) == [.finished(.sent)])
            #expect(early[index]?.first?.writtenThen.contains { $0.callId == rings[index].callId && $0.state == .sent } == true,
                    "ring \(index) reported after its status was written")
        }
        #expect(!publisher.statuses.contains { $0.callId == slow.callId }, "nothing written yet for the slow ring")
        #expect(stores.all.last == 3, "the quick rings' offsets are stored (up to the slow one's)")

        sender.release.open()
        while coordinator.inFlightCount > 0, ContinuousClock.now < bound { try await Task.sleep(for: .milliseconds(5)) }
        #expect(reports.all[3]?.map(\.result) == [.finished(.sent)], "the slow ring finishes once answered")
        #expect(publisher.statuses.filter { $0.callId == slow.callId }.map(\.state) == [.sent])
        #expect(publisher.states == Array(repeating: .sent, count: rings.count), "one status per ring")
        #expect(stores.all.last == 4, "every offset of the run is stored")
    }

    // MARK: Coordinator

    typealias Stores = PartitionCoordinatorTests.Stores

    /// A coordinator that owns partition 0 and records the offsets it stores. The drain bound is an
    /// hour unless a test is about what happens past it.
    private func assignedCoordinator(storingInto stores: Stores, drainTimeout: Duration = .seconds(3600),
                                     leftoverBound: Duration = .seconds(20)) async -> PartitionCoordinator {
        let coordinator = PartitionCoordinator(
            dedupe: PartitionDedupe(retention: .seconds(60), capacity: 100), history: nil, drainTimeout: drainTimeout,
            storeOffset: { _, offset in stores.record(offset) }, pause: { _, _ in }, leftoverBound: leftoverBound,
            logger: Logger(label: "run-tests", factory: { _ in SwiftLogNoOpLogHandler() }))
        await coordinator.assigned([0])
        return coordinator
    }

    private func events(_ offsets: Range<Int64>) -> [InboundEvent] {
        offsets.map { InboundEvent(partition: 0, offset: $0, key: nil, value: []) }
    }

    @Test("a run's offsets are stored as each of its deliveries finishes, never past an unfinished one")
    func runOffsetsAreStoredPerDelivery() async throws {
        let stores = Stores()
        let coordinator = await assignedCoordinator(storingInto: stores)
        let first = PartitionCoordinatorTests.Gate()
        let seen = Locked<[[Int64]]>([])
        guard case .started(let begun) = coordinator.start(run: events(0..<3), { run in
            guard coordinator.beginWork(run) else { return }
            run.finish(1, .finished(.sent))
            run.finish(2, .finished(.sent))
            seen.withLock { $0.append(stores.all) }
            await first.pass()
            run.finish(0, .finished(.sent))
        }) else { Issue.record("run not started"); return }
        #expect(begun == [0, 1, 2])
        while seen.withLock({ $0.isEmpty }) { await Task.yield() }
        #expect(seen.withLock { $0 } == [[]], "nothing stored while offset 0 is unfinished")
        #expect(coordinator.inFlightCount == 1)
        first.open()
        while coordinator.inFlightCount > 0 { await Task.yield() }
        #expect(stores.all == [3])
    }

    @Test("messages of a fetched batch that became stale while the consume loop held them (their partition revoked and assigned again) begin nothing; the re-delivered copies then run")
    func staleMessagesOfAHeldBatchBeginNothing() async throws {
        let stores = Stores()
        let coordinator = await assignedCoordinator(storingInto: stores)
        let ran = Locked<[[Int64]]>([])
        let work: @Sendable (DeliveryRun) async -> Void = { run in
            guard coordinator.beginWork(run) else { return }
            ran.withLock { $0.append(run.tickets.map(\.offset)) }
            for index in run.tickets.indices { run.finish(index, .finished(.sent)) }
        }
        // The loop held offsets 5..<10 of the old assignment; the new one re-delivers from 3.
        await coordinator.revoked([0])
        await coordinator.assigned([0])
        guard case .stale = coordinator.start(run: events(5..<10), isCurrent: { _ in false }, work) else {
            Issue.record("a stale run was begun"); return
        }
        guard case .started(let begun) = coordinator.start(run: events(3..<10), work) else { Issue.record("re-delivered run not started"); return }
        #expect(begun == Array(0..<7))
        while coordinator.inFlightCount > 0 || ran.withLock({ $0.isEmpty }) { await Task.yield() }
        #expect(ran.withLock { $0 } == [Array(3..<10)], "only the re-delivered copies ran, each once")
        #expect(stores.all.last == 10)
        // A run mixing both (a message checked as stale is left out; the others still run).
        guard case .started(let mixed) = coordinator.start(run: events(10..<14), isCurrent: { $0 != 1 }, work) else {
            Issue.record("mixed run not started"); return
        }
        #expect(mixed == [0, 2, 3])
    }

    @Test("a revoke hands back at once a run still waiting for its slots, and lets a begun run finish and store its offsets")
    func revokeHandsBackAWaitingRunAndDrainsABegunOne() async throws {
        let stores = Stores()
        // Drain bound of an hour: the revoke ends only because the waiting run is handed back at once.
        let coordinator = await assignedCoordinator(storingInto: stores)
        let limiter = InFlightLimiter(limit: 3)
        let gate = PartitionCoordinatorTests.Gate()
        let handedBack = Locked(false)
        let work: @Sendable (DeliveryRun) async -> Void = { run in
            guard await limiter.acquire(count: run.tickets.count) else {
                handedBack.withLock { $0 = true }
                return
            }
            defer { limiter.release(count: run.tickets.count) }
            guard coordinator.beginWork(run) else { return }
            await gate.pass()
            for index in run.tickets.indices { run.finish(index, .finished(.sent)) }
        }
        guard case .started = coordinator.start(run: events(0..<3), work) else { Issue.record("first run not started"); return }
        while coordinator.inFlightCount < 3 { await Task.yield() }  // begun: it holds every slot
        guard case .started = coordinator.start(run: events(3..<6), work) else { Issue.record("second run not started"); return }

        let revoke = Task { await coordinator.revoked([0]) }
        while !handedBack.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        #expect(stores.all.isEmpty, "the waiting run stored nothing")
        gate.open()
        await revoke.value
        #expect(stores.all == [1, 2, 3], "the begun run finished within the bound and stored its offsets; the waiting one's stay unstored")
        #expect(coordinator.owned.isEmpty)
    }

    @Test("slots taken several at once are granted in order as enough are returned")
    func limiterGrantsRunsInOrder() async throws {
        let limiter = InFlightLimiter(limit: 4)
        #expect(await limiter.acquire(count: 3))
        let order = Locked<[String]>([])
        let big = Task { _ = await limiter.acquire(count: 4); order.withLock { $0.append("four") } }
        while limiter.waiting < 1 { await Task.yield() }
        let small = Task { _ = await limiter.acquire(count: 1); order.withLock { $0.append("one") } }
        while limiter.waiting < 2 { await Task.yield() }
        #expect(order.withLock { $0 }.isEmpty, "one slot is free, but the earlier request for four comes first")
        limiter.release(count: 3)
        await big.value
        #expect(order.withLock { $0 } == ["four"])
        limiter.release(count: 4)
        await small.value
        #expect(order.withLock { $0 } == ["four", "one"])
        #expect(limiter.inUse == 1)
    }

    @Test("a request cancelled after it was granted keeps its slots and leaves nothing remembered")
    func limiterForgetsGrantedRequests() async {
        let limiter = InFlightLimiter(limit: 1)
        for _ in 0..<200 {
            #expect(await limiter.acquire())
            let waiter = Task { await limiter.acquire() }
            while limiter.waiting < 1 { await Task.yield() }
            limiter.release()  // granted to the waiter...
            waiter.cancel()  // ...which is cancelled before (or after) it returns
            if await waiter.value { limiter.release() }
        }
        #expect(limiter.abandonedCount == 0, "cancelled-after-grant requests are not remembered forever")
        #expect(limiter.inUse == 0)
    }

    @Test("a run's outcomes and push latencies are each counted once in the metrics, by app, state and reason, however their labels alternate")
    func aRunsOutcomesAreCountedOnceEachByTheirLabels() async throws {
        let h = Harness()
        let metrics = WorkerMetrics()
        var processor = h.processor
        processor.metrics = metrics
        let rider = (0..<4).map { makeRing(token: String(repeating: "4\($0)", count: 32)) }
        let taxi = makeRing(token: String(repeating: "5a", count: 32), app: "taxi")
        h.sender.script(rider[2].device.token, [.unregistered])
        let rings = [rider[0], taxi, rider[1], rider[0], taxi, rider[2], rider[3]]  // two duplicates; one failure
        let events = try rings.enumerated().map { try event(.ring($1), offset: Int64($0)) }
        await processor.process(run: events.map { (intake: processor.intake($0), event: $0) }) { _ in }

        let lines = metrics.exposition().split(separator: "\n").map(String.init)
            .filter { $0.hasPrefix("callpush_worker_deliveries_total{") || $0.hasPrefix("callpush_worker_dedupe_hits_total ")
                || $0.hasPrefix("callpush_worker_apns_latency_seconds_count{") }
        for line in [
            #"callpush_worker_deliveries_total{app="rider",platform="ios",state="sent",reason="none"} 3"#,
            #"callpush_worker_deliveries_total{app="rider",platform="ios",state="duplicate",reason="none"} 1"#,
            #"callpush_worker_deliveries_total{app="rider",platform="ios",state="failed",reason="Unregistered"} 1"#,
            #"callpush_worker_deliveries_total{app="taxi",platform="ios",state="sent",reason="none"} 1"#,
            #"callpush_worker_deliveries_total{app="taxi",platform="ios",state="duplicate",reason="none"} 1"#,
            #"callpush_worker_dedupe_hits_total 2"#,
            #"callpush_worker_apns_latency_seconds_count{app="rider"} 4"#,
            #"callpush_worker_apns_latency_seconds_count{app="taxi"} 1"#,
        ] {
            #expect(lines.contains(line), "\(line) in \(lines.sorted())")
        }
        #expect(lines.count == 8, "\(lines.sorted())")
    }

    @Test("in a run, a ring whose app has no credentials for its platform is rejected, also right after a ring of the same app on the other platform")
    func aRunRejectsRingsOfAppsWithoutCredentialsForTheirPlatform() async throws {
        let h = Harness()  // apps: rider (APNs and FCM), taxi (APNs only)
        let rings = [
            makeRing(token: String(repeating: "6a", count: 32)),
            makeRing(token: String(repeating: "6b", count: 32), app: "taxi"),
            makeAndroidRing(token: fcmToken(61), app: "taxi"),  // taxi has no FCM credentials
            makeRing(token: String(repeating: "6c", count: 32), app: "bus"),  // not configured at all
            makeRing(token: String(repeating: "6d", count: 32)),
            makeAndroidRing(token: fcmToken(62)),
        ]
        let events = try rings.enumerated().map { try event(.ring($1), offset: Int64($0)) }
        let reports = await run(h, events).all
        #expect(reports.keys.sorted().map { reports[$0]?.map(\.result) ?? [] }
                == [[.finished(.sent)], [.finished(.sent)], [.finished(.rejected)], [.finished(.rejected)], [.finished(.sent)],
                    [.finished(.sent)]])
        #expect(h.sender.sent.count == 4, "only the rings with credentials are pushed")
        #expect(!h.sender.sent.contains { $0.push.deviceToken == rings[2].device.token || $0.push.deviceToken == rings[3].device.token })
    }
}
