import CallpushTestSupport
import Foundation
import Testing

/// deploy/: every YAML/JSON file parses and the files agree with each other and with the
/// programs' sources (deploy/tools/check_deploy.py, PyYAML). Docker is not available here, so
/// the images are not built; this checks the references.
@Suite struct DeployFiles {
    static let script = ChildProcess.repositoryRoot.appendingPathComponent("deploy/tools/check_deploy.py").path

    func check(deploy: String? = nil) async throws -> ChildProcess.Output {
        let python = try #require(ChildProcess.findExecutable("python3"), "python3 (scripts/install-deps)")
        var arguments = [Self.script, "--root", ChildProcess.repositoryRoot.path]
        if let deploy { arguments += ["--deploy", deploy] }
        return try await ChildProcess.run(python, arguments, environment: ProcessInfo.processInfo.environment, timeout: .seconds(60))
    }

    @Test func everyFileParsesAndEveryReferenceHolds() async throws {
        let result = try await check()
        #expect(!result.stderr.contains("No module named 'yaml'"), "install python3-yaml (scripts/install-deps)")
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains(": OK"))
    }

    @Test func aBrokenReferenceIsCaught() async throws {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("deploy-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: ChildProcess.repositoryRoot.appendingPathComponent("deploy"), to: copy)
        defer { try? FileManager.default.removeItem(at: copy) }
        let worker = copy.appendingPathComponent("kubernetes/push-worker.yaml")
        try String(contentsOf: worker, encoding: .utf8)
            .replacingOccurrences(of: "CALLPUSH_MAX_IN_FLIGHT", with: "CALLPUSH_MAX_INFLIGHT")
            .replacingOccurrences(of: "terminationGracePeriodSeconds: 45", with: "terminationGracePeriodSeconds: 10")
            .replacingOccurrences(of: "image: callpush/push-worker:0.1.0", with: "image: callpush/pusher:0.1.0")
            .write(to: worker, atomically: true, encoding: .utf8)
        let alerts = copy.appendingPathComponent("prometheus/callpush-alerts.yaml")
        try String(contentsOf: alerts, encoding: .utf8)
            .replacingOccurrences(of: "callpush_worker_dead_letters_total", with: "callpush_worker_dlq_total")
            .write(to: alerts, atomically: true, encoding: .utf8)
        let result = try await check(deploy: copy.path)
        #expect(result.status == 1)
        #expect(result.stdout.contains("CALLPUSH_MAX_INFLIGHT is not read by any program"))
        #expect(result.stdout.contains("terminationGracePeriodSeconds (10000 ms) must exceed"))
        #expect(result.stdout.contains("image callpush/pusher:0.1.0 is not built"))
        #expect(result.stdout.contains("metric callpush_worker_dlq_total is not exported"))
    }
}
