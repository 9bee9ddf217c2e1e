import CallpushTestSupport
import Foundation
import Testing

@Suite("fcm-simulator executable")
struct ExecutableTests {
    static func binary() throws -> String {
        try ChildProcess.builtProduct("fcm-simulator")
    }

    @Test("bad flags exit non-zero with a clear message and no stack trace", arguments: [
        ["--port", "http"], ["--no-such-flag"], ["--error-rate", "UNAVAILABLE"], ["--latency-ms", "fast"],
        ["--token-lifetime", "0"], ["--service-account", "/nonexistent.json"],
    ])
    func badFlags(_ arguments: [String]) async throws {
        let output = try await ChildProcess.run(try Self.binary(), arguments, timeout: .seconds(20))
        #expect(output.failedCleanly, "status \(output.status), stderr: \(output.stderr)")
    }

    @Test("prints a ready line, writes the CA and the service account (0600), and exits 0 on SIGTERM")
    func runsAndStops() async throws {
        try await withTemporaryDirectory("fcm-sim") { directory in
            let caPath = directory.appendingPathComponent("ca.pem").path
            let accountPath = directory.appendingPathComponent("sa.json").path
            let process = try await ServerProcess(try Self.binary(), [
                "--port", "0", "--admin-port", "0", "--write-ca", caPath, "--write-service-account", accountPath, "--project", "exe-test",
                "--log-level", "warning",
            ])
            let readyLine = await process.stdoutLine(containing: "fcm-simulator ready", within: .seconds(30))
            let ready = try #require(readyLine, "the ready line; stderr:\n\(process.stderrTail())")
            #expect(ready.contains("https://127.0.0.1:"))
            #expect(try String(contentsOfFile: caPath, encoding: .utf8).contains("BEGIN CERTIFICATE"))
            let account = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: accountPath))) as? [String: Any])
            #expect(account["project_id"] as? String == "exe-test")
            #expect((account["token_uri"] as? String).map { ready.contains($0) } == true)
            let permissions = try FileManager.default.attributesOfItem(atPath: accountPath)[.posixPermissions] as? Int
            #expect(permissions == 0o600)
            process.signal(SIGTERM)
            #expect(await process.exitStatus(within: .seconds(20)) == 0)
        }
    }
}
