import Foundation
import Locking

/// Runs a child process to completion, killed after `timeout` (tests stay bounded).
public enum ChildProcess {
    public struct Output: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
        public var timedOut: Bool
        public var stderrLines: [String] { stderr.split(separator: "\n").map(String.init) }
    }

    /// The directory holding the built executables (the test bundle sits next to them).
    public static var productsDirectory: URL { URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent() }

    /// The repository root (this file is Tests/CallpushTestSupport/ChildProcess.swift).
    public static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// `environment` plus the parent's sanitizer options (a test that gives a child its own
    /// environment still wants it to report like the test process under `scripts/tsan` or
    /// `scripts/asan`: halt on the first race, no leak check at exit, the same suppressions).
    public static func withSanitizerSettings(_ environment: [String: String]) -> [String: String] {
        var merged = environment
        let parent = ProcessInfo.processInfo.environment
        for name in ["TSAN_OPTIONS", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"] where merged[name] == nil {
            if let value = parent[name] { merged[name] = value }
        }
        return merged
    }

    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                    timeout: Duration = .seconds(60)) async throws -> Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = withSanitizerSettings(environment) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cli-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outURL = directory.appendingPathComponent("stdout")
        let errURL = directory.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        process.standardOutput = out
        process.standardError = err
        let killed = KilledFlag()
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = {
                killed.finish()
                continuation.resume(returning: $0.terminationStatus)
            }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
                return
            }
            let pid = process.processIdentifier
            Task {
                try? await Task.sleep(for: timeout)
                // Still running (not yet reaped): kill it. kill(pid, 0) probes without a signal.
                if kill(pid, 0) == 0, !killed.isFinished {
                    killed.set()
                    kill(pid, SIGKILL)
                }
            }
        }
        try? out.close()
        try? err.close()
        return Output(status: status, stdout: (try? String(contentsOf: outURL, encoding: .utf8)) ?? "",
                      stderr: (try? String(contentsOf: errURL, encoding: .utf8)) ?? "", timedOut: killed.wasKilled)
    }

    /// `name` on PATH, or nil.
    public static func findExecutable(_ name: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}

/// Whether the child finished, and whether the test killed it for running too long.
final class KilledFlag: Sendable {
    private let state = Locked((finished: false, killed: false))
    func finish() { state.withLock { $0.finished = true } }
    func set() { state.withLock { $0.killed = true } }
    var isFinished: Bool { state.withLock { $0.finished } }
    var wasKilled: Bool { state.withLock { $0.killed } }
}
