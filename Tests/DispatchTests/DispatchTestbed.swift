import APNs
import APNsSimulator
import CallContract
import CallTracing
import CallpushCore
import CallpushTestSupport
import Foundation
import Kafka
import Locking
import Logging
import NIOPosix
import PushWorker
import ServiceLifecycle
import Testing
@testable import DispatchService

/// An embedded cluster with its own topics and a dispatch instance (real HTTP on port 0) on it.
final class DispatchTestbed: Sendable {
    let cluster: EmbeddedKafkaCluster
    let topics: (requests: String, status: String, dlq: String)
    private let configuration: DispatchConfiguration
    private struct Running: Sendable {
        var app: DispatchApp
        var port: Int
        var group: ServiceGroup
        var task: Task<Void, any Error>
    }
    private let current: Locked<Running?>
    private let partitions: Int
    /// What dispatch traces with.
    private let tracing: CallTracing

    /// The dispatch instance running now.
    var app: DispatchApp { current.withLock { $0!.app } }
    var port: Int { current.withLock { $0!.port } }

    static func kafka(_ cluster: EmbeddedKafkaCluster, _ clientID: String) -> KafkaConfiguration {
        cluster.fastTestConfiguration(clientID: clientID)
    }

    private init(partitions: Int, tracing: CallTracing, configure: (inout DispatchConfiguration) -> Void) async throws {
        self.partitions = partitions
        self.tracing = tracing
        let suffix = UUID().uuidString.prefix(8).lowercased()
        topics = ("requests-\(suffix)", "status-\(suffix)", "dlq-\(suffix)")
        cluster = try EmbeddedKafkaCluster(brokers: 3, logger: quietLogger)
        try cluster.createTopic(topics.requests, partitions: partitions)
        try cluster.createTopic(topics.status, partitions: partitions)
        try cluster.createTopic(topics.dlq, partitions: 1)
        var configuration = testConfiguration(kafka: Self.kafka(cluster, "dispatch"))
        configuration.requestsTopic = topics.requests
        configuration.statusTopic = topics.status
        configure(&configuration)
        self.configuration = configuration
        current = Locked(nil)
        try await startDispatch()
    }

    /// Starts a dispatch instance (the testbed's configuration) and waits until it listens.
    func startDispatch() async throws {
        let app = try DispatchApp(configuration: configuration, logger: quietLogger, tracing: tracing)
        let group = ServiceGroup(services: app.services, logger: quietLogger)
        let task = Task { try await group.run() }
        let port = await app.port()
        current.withLock { $0 = Running(app: app, port: port, group: group, task: task) }
    }

    /// Stops the running dispatch instance gracefully.
    func stopDispatch() async {
        guard let running = current.withLock({ $0 }) else { return }
        await running.group.triggerGracefulShutdown()
        _ = await running.task.result
    }

    static func with(partitions: Int = 3, tracing: CallTracing = .off, configure: (inout DispatchConfiguration) -> Void = { _ in },
                     _ body: (DispatchTestbed) async throws -> Void) async throws {
        let bed = try await DispatchTestbed(partitions: partitions, tracing: tracing, configure: configure)
        do {
            try await bed.waitReady()
            try await body(bed)
        } catch {
            await bed.close()
            throw error
        }
        await bed.close()
    }

    private func close() async {
        await stopDispatch()
        await cluster.shutdown()
    }

    func waitReady() async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if try await get("/readyz").status == 200 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("dispatch not ready in 30 s")
    }

    func post(_ path: String, _ body: Data, headers: [String: String] = testAuth) async throws -> HTTPAnswer {
        try await TestHTTPClient.request(.POST, port: port, path: path, headers: headers, body: body)
    }

    func get(_ path: String, headers: [String: String] = testAuth, timeout: Duration = .seconds(30)) async throws -> HTTPAnswer {
        try await TestHTTPClient.request(.GET, port: port, path: path, headers: headers, timeout: timeout)
    }

    func delete(_ path: String) async throws -> HTTPAnswer {
        try await TestHTTPClient.request(.DELETE, port: port, path: path, headers: testAuth)
    }

    /// Polls `GET /v1/calls/{id}` until `done` holds for its JSON (bounded).
    func waitForCall(_ callId: String, seconds: Double = 30, until done: ([String: Any]) -> Bool) async throws -> [String: Any] {
        let deadline = ContinuousClock.now + .seconds(seconds)
        var last: [String: Any] = [:]
        while ContinuousClock.now < deadline {
            let answer = try await get("/v1/calls/\(callId)")
            if answer.status == 200 {
                last = answer.json
                if done(last) { return last }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("call \(callId) did not reach the expected state in \(seconds) s: \(last)")
        return last
    }

    /// Every record on `topic` (all partitions) from the beginning, read for up to `seconds` or until `count`.
    func readAll(_ topic: String, partitions: Int, count: Int, seconds: Double) async throws -> [KafkaConsumerMessage] {
        try await readRecords(kafka: Self.kafka(cluster, "reader"),
                              from: (0..<Int32(partitions)).map { KafkaPartitionAssignment(topic: topic, partition: $0, start: .beginning) },
                              count: count, seconds: seconds, logger: quietLogger)
    }

    // MARK: A worker delivering to the APNs simulator

    struct Worker {
        let simulator: APNSSimulator
        let client: APNSClient
        let group: ServiceGroup
        let task: Task<Void, any Error>
    }

    func startWorker(tracing: CallTracing = .off) async throws -> Worker {
        let key = APNSSimulatorTestKey()
        var simulatorConfiguration = APNSSimulatorConfiguration()
        simulatorConfiguration.tokenKeys = [key.tokenKey]
        simulatorConfiguration.adminPort = nil
        let simulator = APNSSimulator(configuration: simulatorConfiguration, logger: quietLogger)
        try await simulator.start()
        var clientConfiguration = APNSClientConfiguration.localSimulator(port: simulator.port, caCertificatePEM: simulator.caCertificatePEM)
        clientConfiguration.requestTimeout = .seconds(2)
        let signingKey = try APNSSigningKey(privateKey: key.privateKey, keyID: key.keyID, teamID: key.teamID)
        let client = try APNSClient(configuration: clientConfiguration,
                                    apps: ["rider": APNSApp(bundleID: "com.example.rider", credentials: .token(signingKey))],
                                    logger: quietLogger)
        var configuration = PushWorkerConfiguration(kafka: Self.kafka(cluster, "worker"), workerID: "worker-a")
        configuration.groupID = "workers-\(topics.requests)"
        configuration.requestsTopic = topics.requests
        configuration.statusTopic = topics.status
        configuration.deadLetterTopic = topics.dlq
        configuration.sessionTimeout = .seconds(6)
        configuration.heartbeatInterval = .milliseconds(300)
        configuration.drainTimeout = .seconds(3)
        configuration.rebuildTimeout = .seconds(10)
        configuration.retry = RetryPolicy(base: .milliseconds(100), cap: .milliseconds(300), maxAttempts: 1_000)
        let worker = try PushWorkerService(configuration: configuration, sender: APNSPushSender(client: client), apps: ["rider"],
                                           ackTokens: try AckTokenSigner(secret: testSecret), logger: quietLogger, tracing: tracing,
                                           executors: PushWorkerApp.taskExecutors(on: .singleton))
        let group = ServiceGroup(services: [client, worker], logger: quietLogger)
        let task = Task { try await group.run() }
        // Owning every partition before the test rings: a first group join can be slow on a loaded
        // machine, and a test's ring deadline should not be spent waiting for it.
        let ready = ContinuousClock.now + .seconds(TestTiming.scaled(seconds: 60))
        while worker.ownedPartitions.count < partitions, ContinuousClock.now < ready {
            try await Task.sleep(for: .milliseconds(50))
        }
        if worker.ownedPartitions.count < partitions {
            Issue.record("the worker owns \(worker.ownedPartitions.count) of \(partitions) partitions after 60 s")
        }
        return Worker(simulator: simulator, client: client, group: group, task: task)
    }

    func stop(_ worker: Worker) async {
        await worker.group.triggerGracefulShutdown()
        _ = await worker.task.result
        await worker.simulator.stop()
    }
}
