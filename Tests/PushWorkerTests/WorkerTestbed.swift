import CallContract
import CallpushCore
import CallpushTestSupport
import Foundation
import Kafka
import Logging
import NIOPosix
import ServiceLifecycle
import Locking
import Testing
@testable import PushWorker

/// The statuses seen on the status topic so far, indexed by call.
struct StatusLog: Sendable {
    private(set) var byCall: [String: [CallStatus.State]] = [:]
    private(set) var last: [String: CallStatus] = [:]
    /// The most recent status of each device (by `deviceKey`).
    private(set) var lastByDevice: [String: CallStatus] = [:]
    private(set) var counts: [CallStatus.State: Int] = [:]
    /// Calls with at least one terminal outcome.
    private(set) var terminalCalls = 0
    /// Why deliveries were retried (error code or APNs reason), for failure messages.
    private(set) var retryReasons: [String: Int] = [:]

    /// Calls whose cancel the worker recorded (the call-level `cancelled` status without a device).
    private(set) var cancelMarkers: [String: Int] = [:]

    mutating func append(_ status: CallStatus) {
        if status.isCancelMarker {
            cancelMarkers[status.callId, default: 0] += 1
            return
        }
        let before = terminal(status.callId).isEmpty
        byCall[status.callId, default: []].append(status.state)
        last[status.callId] = status
        if let key = status.deviceKey { lastByDevice[key] = status }
        counts[status.state, default: 0] += 1
        if status.state == .retrying { retryReasons[status.error?.code ?? status.apns?.reason ?? status.fcm?.errorCode ?? "?", default: 0] += 1 }
        if before && !terminal(status.callId).isEmpty { terminalCalls += 1 }
    }

    /// Terminal worker states of a call, in order (`duplicate` is informational, not an outcome).
    func terminal(_ callId: String) -> [CallStatus.State] {
        (byCall[callId] ?? []).filter { $0.isTerminal && $0 != .duplicate }
    }

    /// Every state of a call except `retrying`, in order.
    func states(_ callId: String) -> [CallStatus.State] {
        (byCall[callId] ?? []).filter { $0 != .retrying }
    }

    func count(_ state: CallStatus.State) -> Int { counts[state] ?? 0 }

    /// `ring` went through a burst of failures: it was retried, then sent, and its device got
    /// exactly one push, before the ring deadline (`arrivals`: when the simulator received each).
    func expectRetriedThenSentOnce(_ ring: RingRequest, arrivals: [Date],
                                   sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(terminal(ring.callId) == [.sent], sourceLocation: sourceLocation)
        #expect(byCall[ring.callId]?.contains(.retrying) == true, "the burst was retried", sourceLocation: sourceLocation)
        try #require(arrivals.count == 1, sourceLocation: sourceLocation)
        #expect(arrivals[0] < ring.ringDeadline, sourceLocation: sourceLocation)
    }

    /// For a failure message: how many of `callIds` ended other than `[.sent]`, by what they got
    /// (e.g. `2 × expired`, `1 × sent,sent`, `3 × none`), and the latest reason seen.
    func notSentSummary(_ callIds: [String]) -> (count: Int, text: String) {
        var histogram: [String: Int] = [:]
        var reasons: [String: Int] = [:]
        for callId in callIds where terminal(callId) != [.sent] {
            let states = terminal(callId)
            histogram[states.isEmpty ? "none" : states.map(\.rawValue).joined(separator: ","), default: 0] += 1
            if let last = last[callId], let reason = last.error?.code ?? last.apns?.reason { reasons[reason, default: 0] += 1 }
        }
        let count = histogram.values.reduce(0, +)
        let text = histogram.sorted { $0.value > $1.value }.map { "\($0.value) × \($0.key)" }.joined(separator: ", ")
            + (reasons.isEmpty ? "" : "; reasons: " + reasons.sorted { $0.value > $1.value }.prefix(5).map { "\($0.value) × \($0.key)" }.joined(separator: ", "))
        return (count, text)
    }

    /// The promise of a clean run: every ring pushed exactly once (`pushedTokens`: the device token
    /// of each push seen) and ended with exactly one terminal status, `sent`.
    func expectEachPushedOnceAndSent(_ rings: [RingRequest], pushedTokens: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        let pushesPerToken = Dictionary(grouping: pushedTokens, by: { $0 }).mapValues(\.count)
        #expect(pushesPerToken.count == rings.count, "every call pushed", sourceLocation: sourceLocation)
        #expect(pushesPerToken.values.allSatisfy { $0 == 1 }, "no call pushed twice", sourceLocation: sourceLocation)
        let wrong = notSentSummary(rings.map(\.callId))
        #expect(wrong.count == 0, "every call has exactly one terminal status, sent; got \(wrong.text)", sourceLocation: sourceLocation)
    }

    /// The most recent status of a call.
    func latest(_ callId: String) -> CallStatus? { last[callId] }
    var total: Int { counts.values.reduce(0, +) }
}

struct RunningWorker: Sendable {
    let service: PushWorkerService
    let group: ServiceGroup
    let task: Task<Void, any Error>
}

final class LockedLog: Sendable {
    let value = Locked(StatusLog())
}

/// An embedded cluster with the three topics, a producer, and a collector of the status topic.
final class WorkerTestbed: Sendable {
    let cluster: EmbeddedKafkaCluster
    let producer: KafkaProducer
    let topics: (requests: String, status: String, dlq: String)
    let partitions: Int
    let log = LockedLog()
    let logger = WorkerTestbed.quietLogger

    /// Errors only, unless WORKER_TEST_LOG names a level.
    static let quietLogger: Logger = .quietTestLogger(label: "worker-tests", levelFrom: "WORKER_TEST_LOG")
    private let collector: KafkaConsumer
    private let collecting: Task<Void, Never>

    private init(partitions: Int) throws {
        self.partitions = partitions
        let suffix = UUID().uuidString.prefix(8).lowercased()
        topics = ("requests-\(suffix)", "status-\(suffix)", "dlq-\(suffix)")
        cluster = try EmbeddedKafkaCluster(brokers: 3, logger: Self.quietLogger)
        try cluster.createTopic(topics.requests, partitions: partitions)
        try cluster.createTopic(topics.status, partitions: partitions)
        try cluster.createTopic(topics.dlq, partitions: 1)
        producer = try KafkaProducer(configuration: KafkaProducerConfiguration(kafka: Self.kafka(cluster, "test-producer")), logger: Self.quietLogger)
        collector = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(kafka: Self.kafka(cluster, "status-collector"),
                                                      mode: .group(id: "collector-\(suffix)", topics: [topics.status]),
                                                      sessionTimeout: .seconds(6), heartbeatInterval: .milliseconds(300)),
            logger: Self.quietLogger)
        let collector = self.collector
        let log = self.log
        collecting = Task {
            do {
                for try await message in collector.messages {
                    if let status = try? CallStatus.decode(Data(message.value)) { log.value.withLock { $0.append(status) } }
                }
            } catch {}
        }
    }

    static func kafka(_ cluster: EmbeddedKafkaCluster, _ clientID: String) -> KafkaConfiguration {
        cluster.fastTestConfiguration(clientID: clientID)
    }

    /// The deliveries that partition 0 of `statusTopic` marks handled, read back as a newly assigned
    /// worker rebuilds them (the read must cover the whole partition).
    static func handledDeliveries(kafka: KafkaConfiguration, statusTopic: String,
                                  sourceLocation: SourceLocation = #_sourceLocation) async -> Set<DeliveryKey> {
        let reader = StatusHistoryReader(kafka: kafka, statusTopic: statusTopic, window: .seconds(600),
                                         timeout: TestTiming.scaled(.seconds(20)), logger: quietLogger)
        var handled: Set<DeliveryKey> = []
        let coverage = await reader.rebuild(partitions: [0], now: Date(), handled: { _, key, _ in handled.insert(key) }, cancelled: { _, _, _ in })
        #expect(coverage[0] == .complete, sourceLocation: sourceLocation)
        return handled
    }

    static func with(partitions: Int, _ body: (WorkerTestbed) async throws -> Void) async throws {
        let bed = try WorkerTestbed(partitions: partitions)
        do {
            try await body(bed)
            await bed.close()
        } catch {
            await bed.close()
            throw error
        }
    }

    /// A testbed plus an APNs simulator and a client that trusts it; both are stopped even when `body` throws.
    static func withSimulator(partitions: Int, _ body: (SimulatorHarness, WorkerTestbed) async throws -> Void) async throws {
        let apns = try await SimulatorHarness.start()
        do {
            try await with(partitions: partitions) { bed in try await body(apns, bed) }
            await apns.stop()
        } catch {
            await apns.stop()
            throw error
        }
    }

    private func close() async {
        await collector.shutdown()
        _ = await collecting.value
        await producer.shutdown()
        await cluster.shutdown()
    }

    /// A worker of this testbed's group. Its work runs where the push-worker program runs it, on event loops
    /// (`executors`: by default one on each loop of NIO's shared group, the one the simulator's client uses).
    func startWorker(_ id: String, sender: any VoIPPushSending, maxInFlight: Int = 500, androidApps: Set<String> = [],
                     executors: [any TaskExecutor] = PushWorkerApp.taskExecutors(on: .singleton)) throws -> RunningWorker {
        var configuration = PushWorkerConfiguration(kafka: Self.kafka(cluster, id), workerID: id)
        configuration.groupID = "workers-\(topics.requests)"
        configuration.requestsTopic = topics.requests
        configuration.statusTopic = topics.status
        configuration.deadLetterTopic = topics.dlq
        configuration.maxInFlight = maxInFlight
        configuration.sessionTimeout = .seconds(6)
        configuration.heartbeatInterval = .milliseconds(300)
        configuration.drainTimeout = TestTiming.scaled(.seconds(3))
        configuration.attemptTimeout = TestTiming.scaled(configuration.attemptTimeout)
        configuration.rebuildTimeout = TestTiming.scaled(.seconds(10))
        // Suspensions outlast a test on a loaded machine: a refused credential's 10 s default once ran out
        // before the next ring of the test was admitted, and that ring probed (and rang) instead of waiting.
        configuration.credentialCoolDown = .seconds(300)
        configuration.retry = RetryPolicy(base: .milliseconds(20), cap: .milliseconds(200), maxAttempts: 1_000)
        var logger = self.logger
        logger[metadataKey: "worker"] = "\(id)"
        let service = try PushWorkerService(configuration: configuration, sender: sender, apps: ["rider"], androidApps: androidApps,
                                            ackTokens: try AckTokenSigner(secret: testSecret), logger: logger, executors: executors)
        let group = ServiceGroup(services: [service], logger: logger)
        let task = Task { try await group.run() }
        return RunningWorker(service: service, group: group, task: task)
    }

    /// Graceful stop: drain, commit, leave the group.
    func stop(_ workers: [RunningWorker]) async {
        for worker in workers { await worker.group.triggerGracefulShutdown() }
        for worker in workers { _ = await worker.task.result }
    }

    /// Produces `requests` to the requests topic; returns where each was stored, in order.
    @discardableResult
    func produce(_ requests: [CallRequest]) async throws -> [KafkaDeliveryReport] {
        var reports: [KafkaDeliveryReport] = []
        for chunk in stride(from: 0, to: requests.count, by: 2_000) {
            let records = try requests[chunk..<min(chunk + 2_000, requests.count)].map { request in
                KafkaProducerRecord(topic: topics.requests, key: Array(request.callId.utf8), value: Array(try request.encoded()))
            }
            let results = try await producer.send(records)
            for result in results { reports.append(try result.get()) }
        }
        return reports
    }

    /// Waits (bounded) until every call of `rings` has a terminal status; if one has none, records a
    /// failure that names what is unfinished (`describeUnfinished`). Returns the status log.
    @discardableResult
    func expectEveryCallEnds(_ rings: [RingRequest], stored: [KafkaDeliveryReport], seconds: Double, survivors: [RunningWorker],
                             apns: SimulatorHarness, sourceLocation: SourceLocation = #_sourceLocation) async throws -> StatusLog {
        let statuses = try await collectStatuses(until: { $0.terminalCalls >= rings.count }, seconds: seconds)
        let missing = rings.count { statuses.terminal($0.callId).isEmpty }
        if missing > 0 {
            let unfinished = await describeUnfinished(rings, stored: stored, in: statuses, workers: survivors, apns: apns)
            Issue.record("\(missing) calls without a terminal status; \(unfinished)", sourceLocation: sourceLocation)
        }
        return statuses
    }

    /// For a failure message: the calls of `rings` with no terminal status, per partition (how many,
    /// lowest and highest offset, the statuses of the first few and how often the simulator got
    /// them), the group's committed offsets, and each running worker's state.
    func describeUnfinished(_ rings: [RingRequest], stored reports: [KafkaDeliveryReport], in statuses: StatusLog,
                            workers: [RunningWorker], apns: SimulatorHarness) async -> String {
        var missing: [Int32: [(offset: Int64, ring: RingRequest)]] = [:]
        for (ring, report) in zip(rings, reports) where statuses.terminal(ring.callId).isEmpty {
            missing[report.partition, default: []].append((report.offset, ring))
        }
        let described = missing.sorted { $0.key < $1.key }.map { partition, calls in
            let offsets = calls.map(\.offset)
            let first = calls.prefix(3).map { "@\($0.offset) \(statuses.states($0.ring.callId)) pushed \(apns.pushes(for: $0.ring.device.token).count)x" }
            return "partition \(partition): \(calls.count) calls, offsets \(offsets.min() ?? -1)...\(offsets.max() ?? -1) (\(first.joined(separator: ", ")))"
        }
        var committed = "-"
        if let consumer = workers.first?.service.consumer,
           let offsets = try? await consumer.committedOffsets((0..<self.partitions).map {
               KafkaTopicPartition(topic: topics.requests, partition: Int32($0))
           }, timeout: .seconds(5)) {
            committed = offsets.sorted { $0.key.partition < $1.key.partition }.map { "\($0.key.partition)=\($0.value.map(String.init) ?? "none")" }
                .joined(separator: ",")
        }
        let states = workers.map { "\($0.service.configuration.workerID):\n\($0.service.stateSummary)" }
        return "unfinished: " + described.joined(separator: "; ") + "\ncommitted: \(committed)\n" + states.joined(separator: "\n")
    }

    func produceRaw(key: String?, value: String) async throws {
        _ = try await producer.send(KafkaProducerRecord(topic: topics.requests, key: key.map { Array($0.utf8) }, value: Array(value.utf8)))
    }

    /// Produces `ring` and waits until its call has a terminal status (a bounded test wait), then
    /// returns the log.
    @discardableResult
    func ringUntilEnded(_ ring: RingRequest, seconds: Double = 30) async throws -> StatusLog {
        try await produce([.ring(ring)])
        return try await collectStatuses(until: { !$0.terminal(ring.callId).isEmpty }, seconds: seconds)
    }

    /// Waits until `done` holds for the status log (a bounded test wait), then returns the log.
    func collectStatuses(until done: @Sendable (StatusLog) -> Bool, seconds unscaled: Double) async throws -> StatusLog {
        let seconds = TestTiming.scaled(seconds: unscaled)
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            let snapshot = log.value.withLock { $0 }
            if done(snapshot) { return snapshot }
            try await Task.sleep(for: .milliseconds(50))
        }
        let snapshot = log.value.withLock { $0 }
        Issue.record("status condition not reached in \(seconds) s: \(snapshot.total) statuses, \(snapshot.terminalCalls) terminal calls")
        return snapshot
    }

    func readDeadLetters(count: Int, seconds: Double) async throws -> [KafkaConsumerMessage] {
        try await readRecords(kafka: Self.kafka(cluster, "dlq-reader"),
                              from: [KafkaPartitionAssignment(topic: topics.dlq, partition: 0, start: .beginning)],
                              count: count, seconds: TestTiming.scaled(seconds: seconds), logger: Self.quietLogger)
    }
}
