import CallContract
import CallpushTestSupport
import Foundation
import Kafka
import Testing
@testable import CallpushCLI

/// The built `callpush` binary as a child process: exit statuses and one-line errors on stderr.
@Suite(.serialized) struct CallpushExecutable {
    static var binary: String { ChildProcess.productsDirectory.appendingPathComponent("callpush").path }

    func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> ChildProcess.Output {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the callpush product first")
        var env = environment
        env["PATH"] = ProcessInfo.processInfo.environment["PATH"]
        return try await ChildProcess.run(Self.binary, arguments, environment: env)
    }

    @Test func anUnreachableBrokerIsReportedWithinTheBound() async throws {
        let started = ContinuousClock.now
        let result = try await run(["topics", "describe", "--bootstrap", "127.0.0.1:1", "--connect-timeout", "2s"])
        #expect(!result.timedOut)
        #expect(result.status == CLIExit.unavailable)
        #expect(result.stderrLines.count == 1, "one line: \(result.stderr)")
        #expect(result.stderr.hasPrefix("callpush topics describe: cannot reach Kafka at 127.0.0.1:1 within 2s"), "\(result.stderr)")
        #expect(ContinuousClock.now - started < .seconds(30))
    }

    @Test func aBadFlagIsOneLineAndExitStatus64() async throws {
        let result = try await run(["replay", "--since", "yesterday", "--bootstrap", "127.0.0.1:1"])
        #expect(result.status == 64)
        #expect(result.stderrLines.count == 1 && result.stderr.hasPrefix("callpush: "), "\(result.stderr)")
        #expect(result.stderr.contains("--since"))
        let missing = try await run(["status"])
        #expect(missing.status == 64 && missing.stderrLines.count == 1, "\(missing.stderr)")
        let noCluster = try await run(["status", CallID.make()])
        #expect(noCluster.status == 64 && noCluster.stderr.contains("CALLPUSH_KAFKA_BOOTSTRAP"), "\(noCluster.stderr)")
    }

    @Test func replayAndStatusThroughTheBinary() async throws {
        let bed = try CLITestbed.start()
        let ring = CLITestbed.ring()
        try await bed.produce([try bed.deadLetter(ring, error: "Unregistered")])
        let env = ["CALLPUSH_KAFKA_BOOTSTRAP": bed.cluster.bootstrapServers, "CALLPUSH_TOPIC_REQUESTS": bed.topics.requests,
                   "CALLPUSH_TOPIC_STATUS": bed.topics.status, "CALLPUSH_TOPIC_DLQ": bed.topics.deadLetter]

        let replay = try await run(["replay", "--app", ring.app], environment: env)
        #expect(replay.status == 0, "\(replay.stderr)")
        #expect(replay.stdout.contains("replayed 1 of 1 records examined"), "\(replay.stdout)")
        #expect(replay.stderr.contains("1/1 examined"))
        let again = try await run(["replay", "--app", ring.app], environment: env)
        #expect(again.status == 0 && again.stdout.contains("replayed 0 of 0"), "\(again.stdout)")
        #expect(try await bed.readAll(bed.topics.requests, partitions: 2).count == 1)

        let unknown = try await run(["status", CallID.make()], environment: env)
        #expect(unknown.status == CLIExit.notFound)
        await bed.stop()
    }
}
