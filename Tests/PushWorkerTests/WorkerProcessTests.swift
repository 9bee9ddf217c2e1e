import APNsSimulator
import CallContract
import CallpushTestSupport
import Foundation
import Kafka
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import PushWorker

/// The `push-worker` executable as a real process, configured from the environment.
@Suite(.serialized) struct WorkerProcess {
    static var binary: String { ChildProcess.productsDirectory.appendingPathComponent("push-worker").path }

    @Test func deliversThenStopsOnSIGTERMWithExitZeroWithinTheBound() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the push-worker product first")
        let apns = try await SimulatorHarness.start()
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: WorkerTestbed.quietLogger)
        for topic in [Topics.requests, Topics.status] { try cluster.createTopic(topic, partitions: 2) }
        try cluster.createTopic(Topics.deadLetter, partitions: 1)

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("worker-process-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let keyPath = directory.appendingPathComponent("AuthKey.p8").path
        try apns.key.privateKeyPEM.write(toFile: keyPath, atomically: true, encoding: .utf8)
        let appsPath = directory.appendingPathComponent("apps.json").path
        try #"{"rider": {"bundleId": "com.example.rider", "auth": "token", "keyFile": "\#(keyPath)", "keyId": "\#(apns.key.keyID)", "teamId": "\#(apns.key.teamID)"}}"#
            .write(toFile: appsPath, atomically: true, encoding: .utf8)
        let secretPath = directory.appendingPathComponent("ack-secret").path
        try String(repeating: "k", count: 32).write(toFile: secretPath, atomically: true, encoding: .utf8)
        let caPath = directory.appendingPathComponent("ca.pem").path
        try apns.simulator.writeCACertificate(to: caPath)
        let httpPort = TestPorts.free()

        let environment = [
            "CALLPUSH_KAFKA_BOOTSTRAP": cluster.bootstrapServers,
            "CALLPUSH_KAFKA_TOPIC_METADATA_REFRESH_INTERVAL_MS": "1000",
            // The mock coordinator waits up to the session timeout minus 1 s for members of a
            // group that is rebalancing: with the default 45 s, one slow first join under load
            // keeps the worker unassigned past any reasonable test bound.
            "CALLPUSH_KAFKA_SESSION_TIMEOUT_MS": "6000",
            "CALLPUSH_KAFKA_HEARTBEAT_INTERVAL_MS": "500",
            "CALLPUSH_APPS_FILE": appsPath,
            "CALLPUSH_ACK_SECRET_FILE": secretPath,
            "CALLPUSH_APNS_SANDBOX_ENDPOINT": "127.0.0.1:\(apns.simulator.port)",
            "CALLPUSH_APNS_PRODUCTION_ENDPOINT": "127.0.0.1:\(apns.simulator.port)",
            "CALLPUSH_APNS_CA_FILE": caPath,
            "CALLPUSH_HTTP_HOST": "127.0.0.1",
            "CALLPUSH_HTTP_PORT": String(httpPort),
            "CALLPUSH_DRAIN_TIMEOUT_MS": "2000",
            "CALLPUSH_LOG_LEVEL": "info",
        ]
        let process = try await ServerProcess(Self.binary, environment: environment)

        // Ready once it owns partitions.
        let ready = await process.wait(upTo: .seconds(60), every: .milliseconds(200)) {
            guard let (_, response) = try? await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(httpPort)/readyz")!) else { return false }
            return (response as? HTTPURLResponse)?.statusCode == 200
        }
        try #require(ready, "push-worker became ready; stderr:\n\(process.stderrTail())")
        #if os(Linux)
        // The program allocates with jemalloc (linked ahead of glibc, so its malloc is the process's).
        #expect(process.mapsLibrary("libjemalloc.so"), "push-worker runs with jemalloc")
        #endif

        let ring = makeRing()
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(bootstrapServers: [cluster.bootstrapServers]),
                                         logger: WorkerTestbed.quietLogger)
        _ = try await producer.send(KafkaProducerRecord(topic: Topics.requests, key: Array(ring.callId.utf8),
                                                        value: Array(try CallRequest.ring(ring).encoded())))
        await producer.shutdown()
        let pushDeadline = ContinuousClock.now + .seconds(30)
        while apns.pushes(for: ring.device.token).isEmpty && ContinuousClock.now < pushDeadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(apns.pushes(for: ring.device.token).count == 1, "the process delivered the ring")

        process.signal(SIGTERM)
        let status = await process.exitStatus(within: .seconds(20))
        #expect(status == 0, "graceful stop exits 0 within the bound (nil = still running after 20 s); stderr:\n\(process.stderrTail())")

        await cluster.shutdown()
        await apns.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    @Test func missingConfigurationExitsTwoNamingTheKey() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the push-worker product first")
        let process = try await ServerProcess(Self.binary, environment: ["CALLPUSH_APPS_FILE": "/nonexistent"])
        let status = await process.exitStatus(within: .seconds(20))
        let message = process.stderr
        #expect(status == 2)
        #expect(message == "push-worker: configuration error: CALLPUSH_KAFKA_BOOTSTRAP: required\n")
    }
}
