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

/// Collects a child's stdout and wakes a waiter when a line containing a marker appears.
final class LineWaiter: Sendable {
    private let state = Mutex<(text: String, waiter: (marker: String, continuation: CheckedContinuation<String, any Error>)?)>(("", nil))

    func append(_ data: Data) {
        let resume: (CheckedContinuation<String, any Error>, String)? = state.withLock { state in
            state.text += String(decoding: data, as: UTF8.self)
            guard let waiter = state.waiter, let line = Self.line(in: state.text, containing: waiter.marker) else { return nil }
            state.waiter = nil
            return (waiter.continuation, line)
        }
        if let (continuation, line) = resume { continuation.resume(returning: line) }
    }

    func waitFor(_ marker: String, timeout: Duration) async throws -> String {
        let timer = Task {
            try await Task.sleep(for: timeout)
            self.fail(H2TestClientError(description: "no line containing '\(marker)' within \(timeout)"))
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let line: String? = state.withLock { state in
                if let line = Self.line(in: state.text, containing: marker) { return line }
                state.waiter = (marker, continuation)
                return nil
            }
            if let line { continuation.resume(returning: line) }
        }
    }

    private func fail(_ error: any Error) {
        let continuation = state.withLock { state -> CheckedContinuation<String, any Error>? in
            defer { state.waiter = nil }
            return state.waiter?.continuation
        }
        continuation?.resume(throwing: error)
    }

    private static func line(in text: String, containing marker: String) -> String? {
        text.split(separator: "\n").first { $0.contains(marker) }.map(String.init)
    }
}

/// Waits for a process exit with a timeout.
final class ExitWaiter: Sendable {
    private let state = Mutex<(status: Int32?, continuation: CheckedContinuation<Int32, any Error>?)>((nil, nil))

    func finish(_ status: Int32) {
        let continuation = state.withLock { state -> CheckedContinuation<Int32, any Error>? in
            state.status = status
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: status)
    }

    func wait(timeout: Duration) async throws -> Int32 {
        let timer = Task {
            try await Task.sleep(for: timeout)
            let continuation = self.state.withLock { state -> CheckedContinuation<Int32, any Error>? in
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume(throwing: H2TestClientError(description: "process did not exit within \(timeout)"))
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let status: Int32? = state.withLock { state in
                if let status = state.status { return status }
                state.continuation = continuation
                return nil
            }
            if let status { continuation.resume(returning: status) }
        }
    }
}
