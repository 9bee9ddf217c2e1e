import CallContract
import Foundation
import Kafka
import Testing
@testable import DispatchService

/// The `dispatch` executable as a real process, configured from the environment.
@Suite(.serialized) struct DispatchProcessTests {
    static var binary: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("dispatch").path
    }

    static func run(environment: [String: String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.environment = environment
        process.standardError = Pipe()
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Waits (bounded) for the process to exit; nil if it did not.
    static func exitCode(_ process: Process, within seconds: Double) async throws -> Int32? {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        if process.isRunning {
            process.terminate()
            return nil
        }
        return process.terminationStatus
    }

    @Test func configurationErrorExitsWithCode2NamingTheKey() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the dispatch product first")
        var environment = try ConfigurationTests.environment()
        environment["CALLPUSH_DISPATCH_PORT"] = "http"
        let process = try Self.run(environment: environment)
        #expect(try await Self.exitCode(process, within: 20) == 2)
        let stderr = String(decoding: (process.standardError as? Pipe)?.fileHandleForReading.readDataToEndOfFile() ?? Data(), as: UTF8.self)
        #expect(stderr.contains("CALLPUSH_DISPATCH_PORT"))
    }

    @Test func servesRingsThenStopsOnSIGTERMWithExitZero() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the dispatch product first")
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: quietLogger)
        for topic in [Topics.requests, Topics.status] { try cluster.createTopic(topic, partitions: 2) }
        var environment = try ConfigurationTests.environment()
        environment["CALLPUSH_KAFKA_BOOTSTRAP"] = cluster.bootstrapServers
        let port = Int.random(in: 20_000...60_000)
        environment["CALLPUSH_DISPATCH_PORT"] = String(port)
        environment["CALLPUSH_DISPATCH_HOST"] = "127.0.0.1"
        let process = try Self.run(environment: environment)

        var ready = false
        let deadline = ContinuousClock.now + .seconds(30)
        while !ready, process.isRunning, ContinuousClock.now < deadline {
            ready = (try? await TestHTTPClient.request(.GET, port: port, path: "/readyz", timeout: .seconds(2)))?.status == 200
            if !ready { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(ready, "ready once Kafka is reachable")
        let answer = try await TestHTTPClient.request(.POST, port: port, path: "/v1/calls",
                                                      headers: ["Authorization": "Bearer k1", "Content-Type": "application/json"],
                                                      body: json(ringBody()))
        #expect(answer.status == 202, "\(answer.text)")
        process.interrupt()  // SIGINT: the same graceful path as SIGTERM
        #expect(try await Self.exitCode(process, within: 20) == 0)
        await cluster.shutdown()
    }
}
