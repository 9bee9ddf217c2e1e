import APNsSimulator
import CallContract
import CallpushTestSupport
import CallpushCore
import Foundation
import Kafka
import Logging
import Testing
@testable import PushWorker

/// In-process integration: embedded Kafka (librdkafka's mock cluster) and real workers.
@Suite(.serialized) struct WorkerOnKafka {
    /// 10,000 events counted at the APNs seam (the engine, Kafka layer and coordinator are all real;
    /// only the HTTP/2 hop is replaced, so the test stays within CI time in a debug build).
    @Test func tenThousandRingsThroughTwoWorkersArePushedOnceWithOneTerminalStatusEach() async throws {
        try await WorkerTestbed.with(partitions: 6) { bed in
            let sender = ScriptedSender()
            let a = try bed.startWorker("worker-a", sender: sender)
            let b = try bed.startWorker("worker-b", sender: sender)
            let rings = (0..<10_000).map { i in makeRing(token: hexToken(i)) }
            try await bed.produce(rings.map { .ring($0) })
            let statuses = try await bed.collectStatuses(until: { $0.terminalCalls >= rings.count }, seconds: 180)
            statuses.expectEachPushedOnceAndSent(rings, pushedTokens: sender.sent.map(\.push.deviceToken))
            await bed.stop([a, b])
        }
    }

    /// The same through the real APNs client and the simulator: 10,000 events, counted at the
    /// simulator. Under a sanitizer (time scale > 1, 5-15x slower) it runs 1,500 of them.
    @Test func ringsThroughTwoWorkersAndTheSimulatorArePushedOnceWithOneTerminalStatusEach() async throws {
        let events = TestTiming.scale > 1 ? 1_500 : 10_000
        try await WorkerTestbed.withSimulator(partitions: 6) { apns, bed in
            // A healthy transport: with too many streams in flight a debug build times out and loses
            // connections, and the retries those force may ring twice (apns.md: a lost response may
            // have been delivered). Exactly-once is the promise when APNs answers.
            let a = try bed.startWorker("worker-a", sender: apns.sender, maxInFlight: 100)
            let b = try bed.startWorker("worker-b", sender: apns.sender, maxInFlight: 100)
            // All events are produced at once: the last ones wait for the first ones, so the
            // deadline covers the whole run (a debug build delivers a few hundred per second).
            let rings = (0..<events).map { i in makeRing(token: hexToken(i), ringsFor: TestTiming.scaled(seconds: 240)) }
            try await bed.produce(rings.map { .ring($0) })
            let statuses = try await bed.collectStatuses(until: { $0.terminalCalls >= rings.count }, seconds: 300)
            #expect(statuses.count(.retrying) == 0, "the transport stayed healthy (otherwise see the comment above); retried: \(statuses.retryReasons)")
            statuses.expectEachPushedOnceAndSent(rings, pushedTokens: apns.simulator.pushes().map(\.deviceToken))
            await bed.stop([a, b])
        }
    }

    @Test func aWorkerStoppedAbruptlyLosesNoCall() async throws {
        try await WorkerTestbed.withSimulator(partitions: 6) { apns, bed in
            apns.answer(after: 20)
            let a = try bed.startWorker("worker-a", sender: apns.sender, maxInFlight: 50)
            let b = try bed.startWorker("worker-b", sender: apns.sender, maxInFlight: 50)
            // The stop must take partitions away: the first worker to join may be given all of them
            // until the other one's join is served.
            #expect(try await eventually(seconds: 30, every: .milliseconds(50)) {
                !a.service.ownedPartitions.isEmpty && !b.service.ownedPartitions.isEmpty
            }, "both workers own partitions before the stop")
            // Deadlines no rebalance here comes near: an expired call is rightly not pushed, and this test is about loss.
            let rings = (0..<1_500).map { i in makeRing(token: hexToken(i), ringsFor: TestTiming.scaled(seconds: 300)) }
            let stored = try await bed.produce(rings.map { .ring($0) })
            _ = try await bed.collectStatuses(until: { $0.terminalCalls >= 300 }, seconds: 90)
            a.task.cancel()  // abrupt: in-flight deliveries are not drained
            _ = await a.task.result

            try await bed.expectEveryCallEnds(rings, stored: stored, seconds: 180, survivors: [b], apns: apns)
            let pushes = Dictionary(grouping: apns.simulator.pushes(), by: \.deviceToken).mapValues(\.count)
            #expect(pushes.count == rings.count)
            let duplicates = pushes.values.reduce(0) { $0 + $1 - 1 }
            // A push accepted by APNs whose status was not yet durable when the worker died is
            // pushed again by the next owner: bounded by the dead worker's in-flight limit.
            #expect(duplicates <= 50)
            print("abrupt stop: calls=\(rings.count) duplicate pushes=\(duplicates) (bound 50)")
            await bed.stop([b])
        }
    }

    /// A worker killed while the group rebalances for its join (the running worker has given up its
    /// partitions, the new one owns none yet): the running worker ends with every partition and
    /// every call ends. On the embedded cluster the departed member is still given partitions until
    /// its session times out (6 s here), so the survivor gets them in two steps; a real cluster
    /// drops a member that left at once.
    @Test func aWorkerStoppedWhileTheGroupRebalancesLosesNoCall() async throws {
        try await WorkerTestbed.withSimulator(partitions: 6) { apns, bed in
            // ~250 rings/s: most of the backlog is still to do (buffered, in flight or not yet fetched)
            // when the rebalance comes.
            apns.answer(after: 200)
            let b = try bed.startWorker("worker-b", sender: apns.sender, maxInFlight: 50)
            // Deadlines no rebalance here comes near (the survivor gets the partitions back only after the
            // departed member's session timed out): an expired call is rightly not pushed, and this test is about loss.
            let rings = (0..<1_500).map { i in makeRing(token: hexToken(i), ringsFor: TestTiming.scaled(seconds: 300)) }
            let stored = try await bed.produce(rings.map { .ring($0) })
            _ = try await bed.collectStatuses(until: { $0.terminalCalls >= 100 }, seconds: 90)
            #expect(b.service.ownedPartitions.count == 6)
            let a = try bed.startWorker("worker-a", sender: apns.sender, maxInFlight: 50)
            let rebalancing = try await eventually(seconds: 30, every: .milliseconds(2)) { b.service.ownedPartitions.isEmpty }
            #expect(rebalancing, "the running worker gives up its partitions when the new one joins")
            a.task.cancel()
            _ = await a.task.result

            try await bed.expectEveryCallEnds(rings, stored: stored, seconds: 120, survivors: [b], apns: apns)
            #expect(Set(apns.simulator.pushes().map(\.deviceToken)).count == rings.count, "every call was pushed")
            #expect(b.service.ownedPartitions.count == 6)
            await bed.stop([b])
        }
    }

    @Test func aPartitionMovingToAnotherWorkerDoesNotRepushSentCalls() async throws {
        try await WorkerTestbed.withSimulator(partitions: 3) { apns, bed in
            let a = try bed.startWorker("worker-a", sender: apns.sender)
            let rings = (0..<300).map { i in makeRing(token: hexToken(i)) }
            try await bed.produce(rings.map { .ring($0) })
            _ = try await bed.collectStatuses(until: { $0.terminalCalls >= rings.count }, seconds: 60)
            await bed.stop([a])
            #expect(apns.simulator.pushes().count == rings.count)

            // The same events arrive again (as after a crash before the commit); the new owner
            // knows them only from the status topic.
            let b = try bed.startWorker("worker-b", sender: apns.sender)
            try await bed.produce(rings.map { .ring($0) })
            let statuses = try await bed.collectStatuses(until: { $0.count(.duplicate) >= rings.count }, seconds: 60)
            #expect(apns.simulator.pushes().count == rings.count, "nothing pushed again")
            for ring in rings { #expect(statuses.states(ring.callId) == [.sent, .duplicate]) }
            await bed.stop([b])
        }
    }

    @Test func aReplayRingsAgainButARedeliveryDoesNot() async throws {
        try await WorkerTestbed.withSimulator(partitions: 2) { apns, bed in
            let worker = try bed.startWorker("worker-a", sender: apns.sender)
            let ring = makeRing()
            try await bed.produce([.ring(ring)])
            _ = try await bed.collectStatuses(until: { $0.terminal(ring.callId) == [.sent] }, seconds: 30)
            var replayed = ring
            replayed.replay = 1
            try await bed.produce([.ring(ring), .ring(replayed)])
            let statuses = try await bed.collectStatuses(until: { $0.states(ring.callId).count >= 3 }, seconds: 30)
            // The redelivery and the replay are handled side by side: their statuses may come in either order.
            let states = statuses.states(ring.callId)
            #expect(states.first == .sent && states.dropFirst().sorted { $0.rawValue < $1.rawValue } == [.duplicate, .sent], "\(states)")
            #expect(apns.pushes(for: ring.device.token).count == 2, "the original and the replay")
            await bed.stop([worker])
        }
    }

    @Test func cancelBeforeThePushPreventsItAndCancelAfterLeavesItSent() async throws {
        try await WorkerTestbed.withSimulator(partitions: 2) { apns, bed in
            let worker = try bed.startWorker("worker-a", sender: apns.sender)
            let cancelledCall = makeRing(token: hexToken(0xca1))
            let sentCall = makeRing(token: hexToken(0x5e7))
            try await bed.produce([.cancel(CancelRequest(callId: cancelledCall.callId, requestedAt: Date())), .ring(cancelledCall), .ring(sentCall)])
            _ = try await bed.collectStatuses(until: { $0.terminalCalls >= 2 }, seconds: 30)
            try await bed.produce([.cancel(CancelRequest(callId: sentCall.callId, requestedAt: Date())), .ring(makeRing(token: hexToken(0xf00)))])
            let statuses = try await bed.collectStatuses(until: { $0.terminalCalls >= 3 }, seconds: 30)
            #expect(statuses.states(cancelledCall.callId) == [.cancelled])
            #expect(apns.pushes(for: cancelledCall.device.token).isEmpty, "no push for a call cancelled first")
            #expect(statuses.states(sentCall.callId) == [.sent], "a cancel after the push changes nothing")
            #expect(statuses.cancelMarkers[cancelledCall.callId] == 1 && statuses.cancelMarkers[sentCall.callId] == 1,
                    "every processed cancel is recorded on the status topic")
            await bed.stop([worker])
        }
    }

    @Test func invalidEventsAreDeadLetteredAndTheWorkerKeepsGoing() async throws {
        try await WorkerTestbed.with(partitions: 2) { bed in
            let sender = ScriptedSender()
            let worker = try bed.startWorker("worker-a", sender: sender)
            let callId = CallID.make()
            try await bed.produceRaw(key: callId, value: "{\"type\":\"ring\",")
            try await bed.produceRaw(key: nil, value: String(repeating: "x", count: 70_000))
            let good = makeRing()
            try await bed.produce([.ring(good)])
            let statuses = try await bed.collectStatuses(until: { $0.terminal(good.callId) == [.sent] && $0.count(.rejected) >= 1 }, seconds: 60)
            #expect(statuses.terminal(callId) == [.rejected])
            let dlq = try await bed.readDeadLetters(count: 2, seconds: 30)
            #expect(Set(dlq.compactMap { $0.header(DeadLetterHeader.error)?.stringValue }) == ["malformed-json", "invalid-value"])
            #expect(dlq.allSatisfy { $0.header(DeadLetterHeader.reason)?.stringValue?.isEmpty == false })
            await bed.stop([worker])
        }
    }
}

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import ServiceLifecycle

@Suite(.serialized) struct WorkerOperations {
    func get(_ url: String) async throws -> (Int, String) {
        let (data, response) = try await URLSession.shared.data(from: URL(string: url)!)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    @Test func metricsAndReadinessReflectWhatTheWorkerDid() async throws {
        try await WorkerTestbed.with(partitions: 2) { bed in
            let sender = ScriptedSender()
            let worker = try bed.startWorker("worker-a", sender: sender)
            let portBox = PortBox()
            let http = WorkerHTTPServer.make(worker: worker.service, host: "127.0.0.1", port: 0, logger: bed.logger) { port in
                await portBox.set(port)
            }
            let group = ServiceGroup(services: [http], logger: bed.logger)
            let serving = Task { try await group.run() }
            let port = try await portBox.wait()

            let (healthStatus, _) = try await get("http://127.0.0.1:\(port)/healthz")
            #expect(healthStatus == 200)
            let ring = makeRing()
            let dead = makeRing(token: hexToken(0xdead))
            sender.script(dead.device.token, [.unregistered])
            try await bed.produce([.ring(ring), .ring(dead)])
            _ = try await bed.collectStatuses(until: { $0.terminalCalls >= 2 }, seconds: 30)

            let (readyStatus, _) = try await get("http://127.0.0.1:\(port)/readyz")
            #expect(readyStatus == 200, "ready once partitions are assigned")
            // A delivery is counted once its status is acknowledged to the worker, which can be just after the
            // status is readable from the topic: scrape until both outcomes are counted (bounded).
            let expected = [#"callpush_worker_deliveries_total{app="rider",platform="ios",state="sent",reason="none"} 1"#,
                            #"callpush_worker_deliveries_total{app="rider",platform="ios",state="failed",reason="Unregistered"} 1"#,
                            #"callpush_worker_dead_letters_total{error="Unregistered",platform="ios"} 1"#]
            var (metricsStatus, metrics) = (0, "")
            _ = try await eventually(seconds: 10, every: .milliseconds(100)) {
                (metricsStatus, metrics) = try await get("http://127.0.0.1:\(port)/metrics")
                return expected.allSatisfy(metrics.contains)
            }
            #expect(metricsStatus == 200)
            for line in expected { #expect(metrics.contains(line)) }
            #expect(metrics.contains("callpush_worker_apns_latency_seconds_bucket"))
            #expect(!metrics.contains(ring.device.token) && !metrics.contains(ring.callId), "no tokens or call ids in labels")
            // Gauges are refreshed every 5 s.
            try await Task.sleep(for: .seconds(5.5))
            let (_, later) = try await get("http://127.0.0.1:\(port)/metrics")
            #expect(later.contains("callpush_worker_assigned_partitions 2"))
            #expect(later.contains("callpush_worker_in_flight 0"))
            let lagLines = later.split(separator: "\n").filter { $0.hasPrefix("callpush_worker_consumer_lag_messages{") }
            #expect(!lagLines.isEmpty)
            #expect(lagLines.allSatisfy { $0.hasSuffix(" 0") || $0.hasSuffix(" 0.0") }, "everything processed: no lag")

            await group.triggerGracefulShutdown()
            _ = await serving.result
            await bed.stop([worker])
        }
    }
}

extension WorkerOperations {
    /// The lag gauge counts what is not finished: with two deliveries held in flight, the 30 events of
    /// partition 0 are all behind its first unfinished offset. (The high watermark comes from the
    /// consumer's fetch responses, not from a broker request every 5 s.) Partition 1 got no event since
    /// the assignment: its gauge is there too, at 0 (an idle partition must not look like a missing one).
    @Test func consumerLagCountsTheBacklogBehindTheDeliveriesInFlight() async throws {
        try await WorkerTestbed.with(partitions: 2) { bed in
            let sender = ScriptedSender(latency: .seconds(60))
            let worker = try bed.startWorker("worker-lag", sender: sender, maxInFlight: 2)
            let records = try (0..<30).map { _ in
                let ring = CallRequest.ring(makeRing())
                return KafkaProducerRecord(topic: bed.topics.requests, partition: 0, key: Array(ring.callId.utf8),
                                           value: Array(try ring.encoded()))
            }
            for result in try await bed.producer.send(records) { _ = try result.get() }
            func lag(_ partition: Int) -> Double? {
                worker.service.metrics.exposition().split(separator: "\n")
                    .first { $0.hasPrefix(#"callpush_worker_consumer_lag_messages{partition="\#(partition)"}"#) }
                    .flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }
            }
            // Gauges are refreshed every 5 s.
            let deadline = ContinuousClock.now + .seconds(30)
            while lag(0) != 30 || lag(1) == nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(250))
            }
            #expect(lag(0) == 30)
            #expect(lag(1) == 0)
            #expect(worker.service.coordinator.inFlightCount == 2)
            await bed.stop([worker])
        }
    }

    /// A partition that moved to another worker loses its gauge here (the group's gauges summed must
    /// not count it twice); an owned partition whose lag is unknown this time keeps its last value.
    @Test func lagGaugesFollowTheOwnedPartitions() {
        let metrics = WorkerMetrics()
        /// Partition → lag, as exported.
        func exported() -> [String: Double] {
            let prefix = #"callpush_worker_consumer_lag_messages{partition=""#
            return metrics.exposition().split(separator: "\n").reduce(into: [:]) { lags, line in
                guard line.hasPrefix(prefix), let close = line.firstIndex(of: "}") else { return }
                let partition = line[line.index(line.startIndex, offsetBy: prefix.count)..<close].dropLast()
                lags[String(partition)] = line.split(separator: " ").last.flatMap { Double($0) }
            }
        }
        metrics.setLags([0: 5, 1: 7, 2: 0], owned: [0, 1, 2])
        #expect(exported() == ["0": 5, "1": 7, "2": 0])
        metrics.setLags([0: 4], owned: [0, 1])
        #expect(exported() == ["0": 4, "1": 7])
        metrics.setLags([2: 3], owned: [2])
        #expect(exported() == ["2": 3])
    }
}

actor PortBox {
    private var port: Int?
    private var waiters: [CheckedContinuation<Int, Never>] = []

    func set(_ value: Int) {
        port = value
        for waiter in waiters { waiter.resume(returning: value) }
        waiters = []
    }

    func wait() async throws -> Int {
        if let port { return port }
        return await withCheckedContinuation { waiters.append($0) }
    }
}

@Suite(.serialized) struct WorkerTopicLayout {
    @Test func aStatusTopicWithAnotherPartitionCountStopsTheWorkerNamingTheSetting() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: WorkerTestbed.quietLogger)
        try cluster.createTopic("requests-layout", partitions: 6)
        try cluster.createTopic("status-layout", partitions: 3)
        var configuration = PushWorkerConfiguration(kafka: WorkerTestbed.kafka(cluster, "layout"), workerID: "layout")
        configuration.requestsTopic = "requests-layout"
        configuration.statusTopic = "status-layout"
        let worker = try PushWorkerService(configuration: configuration, sender: ScriptedSender(), apps: ["rider"],
                                           ackTokens: try AckTokenSigner(secret: testSecret), logger: WorkerTestbed.quietLogger)
        let outcome = await Task { try await worker.run() }.result
        guard case .failure(let error) = outcome, let problem = error as? ConfigurationError else {
            Issue.record("the worker started on topics with different partition counts: \(outcome)")
            await cluster.shutdown()
            return
        }
        #expect(problem.key == "CALLPUSH_TOPIC_STATUS")
        #expect(problem.problem.contains("3 partitions") && problem.problem.contains("6"))
        await cluster.shutdown()
    }
}

@Suite(.serialized) struct StatusHistoryRebuild {
    @Test func aHandledStatusMarksItsDeliveryButADuplicateAloneDoesNot() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: WorkerTestbed.quietLogger)
        try cluster.createTopic("status-history", partitions: 1)
        let kafka = WorkerTestbed.kafka(cluster, "history")
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(kafka: kafka), logger: WorkerTestbed.quietLogger)
        let publisher = KafkaOutcomePublisher(producer: producer, statusTopic: "status-history", deadLetterTopic: "unused")
        func status(_ callId: String, _ state: CallStatus.State) -> CallStatus {
            CallStatus(callId: callId, deviceId: nil, deviceKey: "k-\(callId)", app: "rider", state: state, attempt: 1,
                       replay: 0, at: Date(), worker: "w1")
        }
        // "sent": handled. "duplicate" alone: a copy answered while another was in progress, which was
        // then handed back; nothing rang, so the next owner must push. "retrying" alone: not handled.
        for item in [status("sent-call", .sent), status("dup-call", .duplicate), status("retry-call", .retrying)] {
            try await publisher.publish(status: item, partition: 0, within: nil)
        }
        await producer.shutdown()
        let handled = await WorkerTestbed.handledDeliveries(kafka: kafka, statusTopic: "status-history")
        #expect(handled.contains(DeliveryKey(callId: "sent-call", deviceKey: "k-sent-call", replay: 0)))
        #expect(!handled.contains(DeliveryKey(callId: "dup-call", deviceKey: "k-dup-call", replay: 0)))
        #expect(!handled.contains(DeliveryKey(callId: "retry-call", deviceKey: "k-retry-call", replay: 0)))
        await cluster.shutdown()
    }
}
