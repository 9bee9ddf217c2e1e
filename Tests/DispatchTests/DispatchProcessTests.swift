import CallContract
import CallpushTestSupport
import Foundation
import Kafka
import Testing
@testable import DispatchService

/// The `dispatch` executable as a real process, configured from the environment.
@Suite(.serialized) struct DispatchProcessTests {
    static var binary: String { ChildProcess.productsDirectory.appendingPathComponent("dispatch").path }

    @Test func configurationErrorExitsWithCode2NamingTheKey() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the dispatch product first")
        var environment = try ConfigurationTests.environment()
        environment["CALLPUSH_DISPATCH_PORT"] = "http"
        let process = try await ServerProcess(Self.binary, environment: environment)
        #expect(await process.exitStatus(within: .seconds(20)) == 2)
        #expect(process.stderr.contains("CALLPUSH_DISPATCH_PORT"))
    }

    @Test func servesRingsThenStopsOnSIGTERMWithExitZero() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the dispatch product first")
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: quietLogger)
        for topic in [Topics.requests, Topics.status] { try cluster.createTopic(topic, partitions: 2) }
        var environment = try ConfigurationTests.environment()
        environment["CALLPUSH_KAFKA_BOOTSTRAP"] = cluster.bootstrapServers
        let port = TestPorts.free()
        environment["CALLPUSH_DISPATCH_PORT"] = String(port)
        environment["CALLPUSH_DISPATCH_HOST"] = "127.0.0.1"
        let metricsPort = TestPorts.free()
        environment["CALLPUSH_DISPATCH_METRICS_PORT"] = String(metricsPort)
        environment["CALLPUSH_DISPATCH_METRICS_HOST"] = "127.0.0.1"
        let process = try await ServerProcess(Self.binary, environment: environment)

        let ready = await process.wait(upTo: .seconds(30), every: .milliseconds(200)) {
            (try? await TestHTTPClient.request(.GET, port: port, path: "/readyz", timeout: .seconds(2)))?.status == 200
        }
        #expect(ready, "ready once Kafka is reachable; stderr:\n\(process.stderrTail())")
        #if os(Linux)
        // The program allocates with jemalloc (linked ahead of glibc, so its malloc is the process's).
        #expect(process.mapsLibrary("libjemalloc.so"), "dispatch runs with jemalloc")
        #endif
        let answer = try await TestHTTPClient.request(.POST, port: port, path: "/v1/calls",
                                                      headers: ["Authorization": "Bearer k1", "Content-Type": "application/json"],
                                                      body: json(ringBody()))
        #expect(answer.status == 202, "\(answer.text)")
        let metrics = try await TestHTTPClient.request(.GET, port: metricsPort, path: "/metrics")
        #expect(metrics.status == 200 && metrics.text.contains("callpush_dispatch_requests_total"), "/metrics on its own port")
        #expect(try await TestHTTPClient.request(.GET, port: port, path: "/metrics").status == 404, "and not on the API's")
        process.signal(SIGINT)  // the same graceful path as SIGTERM
        #expect(await process.exitStatus(within: .seconds(20)) == 0, "stderr:\n\(process.stderrTail())")
        await cluster.shutdown()
    }
}
