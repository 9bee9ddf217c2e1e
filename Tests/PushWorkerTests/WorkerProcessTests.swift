import APNsSimulator
import CallContract
import Foundation
import Kafka
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import PushWorker

/// The `push-worker` executable as a real process, configured from the environment.
@Suite(.serialized) struct WorkerProcess {
    static var binary: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("push-worker").path
    }

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
        let httpPort = Int.random(in: 20_000...60_000)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.environment = [
            "CALLPUSH_KAFKA_BOOTSTRAP": cluster.bootstrapServers,
            "CALLPUSH_KAFKA_TOPIC_METADATA_REFRESH_INTERVAL_MS": "1000",
            "CALLPUSH_APPS_FILE": appsPath,
            "CALLPUSH_ACK_SECRET_FILE": secretPath,
            "CALLPUSH_APNS_SANDBOX_ENDPOINT": "127.0.0.1:\(apns.simulator.port)",
            "CALLPUSH_APNS_PRODUCTION_ENDPOINT": "127.0.0.1:\(apns.simulator.port)",
            "CALLPUSH_APNS_CA_FILE": caPath,
            "CALLPUSH_HTTP_HOST": "127.0.0.1",
            "CALLPUSH_HTTP_PORT": String(httpPort),
            "CALLPUSH_DRAIN_TIMEOUT_MS": "2000",
            "CALLPUSH_LOG_LEVEL": "warning",
        ]
        let exited = ProcessExit()
        process.terminationHandler = { exited.finish($0.terminationStatus) }
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        // Ready once it owns partitions.
        let readyDeadline = ContinuousClock.now + .seconds(30)
        var ready = false
        while !ready && ContinuousClock.now < readyDeadline {
            if let (_, response) = try? await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(httpPort)/readyz")!),
               (response as? HTTPURLResponse)?.statusCode == 200 { ready = true } else { try await Task.sleep(for: .milliseconds(200)) }
        }
        try #require(ready, "push-worker became ready")

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

        kill(process.processIdentifier, SIGTERM)
        let status = await exited.wait(atMost: .seconds(20))
        #expect(status == 0, "graceful stop exits 0 within the bound (nil = still running after 20 s)")

        await cluster.shutdown()
        await apns.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    @Test func missingConfigurationExitsTwoNamingTheKey() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the push-worker product first")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.environment = ["CALLPUSH_APPS_FILE": "/nonexistent"]
        let errors = Pipe()
        process.standardError = errors
        let exited = ProcessExit()
        process.terminationHandler = { exited.finish($0.terminationStatus) }
        try process.run()
        let status = await exited.wait(atMost: .seconds(20))
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(status == 2)
        #expect(message == "push-worker: configuration error: CALLPUSH_KAFKA_BOOTSTRAP: required\n")
    }
}

/// A process's exit status, awaited with a bound.
final class ProcessExit: Sendable {
    private let status = AsyncStream<Int32>.makeStream()

    func finish(_ code: Int32) {
        status.continuation.yield(code)
        status.continuation.finish()
    }

    /// The exit status, or nil if the process did not exit in time.
    func wait(atMost bound: Duration) async -> Int32? {
        await withTaskGroup(of: Int32?.self) { group in
            group.addTask { for await code in self.status.stream { return code }; return nil }
            group.addTask { try? await Task.sleep(for: bound); return nil }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
