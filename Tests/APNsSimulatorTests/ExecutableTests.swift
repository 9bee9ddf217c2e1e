import Foundation
import Synchronization
import Testing

@Suite("apns-simulator executable")
struct ExecutableTests {
    static func binary() throws -> String {
        let path = ChildProcess.productsDirectory.appendingPathComponent("apns-simulator").path
        try #require(
            FileManager.default.isExecutableFile(atPath: path),
            "apns-simulator not built next to the tests (\(path)); run `swift build` first"
        )
        return path
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
        #expect(output.status != 0)
        #expect(output.stderr.contains("Error"), "stderr: \(output.stderr)")
        #expect(!output.stderr.contains("Fatal error"))
        #expect(!output.stderr.contains("Stack dump"))
    }

    @Test("prints a ready line, writes the CA, serves HTTP/2 and exits 0 on SIGTERM")
    func runsAndStops() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sim-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let caPath = directory.appendingPathComponent("ca.pem").path

        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.binary())
        process.arguments = ["--port", "0", "--admin-port", "0", "--write-ca", caPath, "--log-level", "warning"]
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        let lines = LineWaiter()
        stdout.fileHandleForReading.readabilityHandler = { handle in lines.append(handle.availableData) }
        let exited = ExitWaiter()
        process.terminationHandler = { exited.finish($0.terminationStatus) }
        try process.run()
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            stdout.fileHandleForReading.readabilityHandler = nil
        }

        let ready = try await lines.waitFor("apns-simulator ready", timeout: .seconds(20))
        let prefix = try #require(ready.range(of: "https://127.0.0.1:"))
        let port = try #require(Int(ready[prefix.upperBound...].prefix { $0.isNumber }))
        let ca = try String(contentsOfFile: caPath, encoding: .utf8)
        let client = try await H2TestClient.connect(port: port, caPEM: ca)
        let response = try await client.send(method: "GET", path: "/3/device/x", headers: [], body: nil)
        #expect(response.status == 405)
        await client.close()

        kill(process.processIdentifier, SIGTERM)
        let status = try await exited.wait(timeout: .seconds(20))
        #expect(status == 0)
    }
}

