import CallpushTestSupport
import Foundation
import Testing

@Suite("apns-simulator executable")
struct ExecutableTests {
    static func binary() throws -> String {
        try ChildProcess.builtProduct("apns-simulator")
    }

    @Test("--help documents the options and exits 0")
    func help() async throws {
        let output = try await ChildProcess.run(try Self.binary(), ["--help"], timeout: .seconds(20))
        #expect(output.status == 0)
        for option in ["--port", "--admin-port", "--write-ca", "--token-key", "--environment", "--allow-unauthenticated",
                       "--goaway-after", "--drop-after", "--latency-ms", "--error-rate", "--unregistered",
                       "--max-concurrent-streams", "--log-level", "--cert", "--key"] {
            #expect(output.stdout.contains(option), "help does not mention \(option)")
        }
    }

    @Test("bad flags exit non-zero with a clear message and no stack trace", arguments: [
        ["--port", "http"], ["--no-such-flag"], ["--error-rate", "503"], ["--latency-ms", "fast"],
        ["--environment", "staging"], ["--token-key", "TEAM:KEY:/nonexistent.p8"],
    ])
    func badFlags(_ arguments: [String]) async throws {
        let output = try await ChildProcess.run(try Self.binary(), arguments, timeout: .seconds(20))
        #expect(output.failedCleanly, "status \(output.status), stderr: \(output.stderr)")
    }

    @Test("prints a ready line, writes the CA, serves HTTP/2 and exits 0 on SIGTERM")
    func runsAndStops() async throws {
        try await withTemporaryDirectory("sim") { directory in
            let caPath = directory.appendingPathComponent("ca.pem").path

            let process = try await ServerProcess(try Self.binary(), ["--port", "0", "--admin-port", "0", "--write-ca", caPath, "--log-level", "warning"])
            let readyLine = await process.stdoutLine(containing: "apns-simulator ready", within: .seconds(20))
            let ready = try #require(readyLine, "the ready line; stderr:\n\(process.stderrTail())")
            let prefix = try #require(ready.range(of: "https://127.0.0.1:"))
            let port = try #require(Int(ready[prefix.upperBound...].prefix { $0.isNumber }))
            let ca = try String(contentsOfFile: caPath, encoding: .utf8)
            let client = try await H2TestClient.connect(port: port, caPEM: ca)
            let response = try await client.send(method: "GET", path: "/3/device/x", headers: [], body: nil)
            #expect(response.status == 405)
            await client.close()

            process.signal(SIGTERM)
            #expect(await process.exitStatus(within: .seconds(20)) == 0)
        }
    }
}

