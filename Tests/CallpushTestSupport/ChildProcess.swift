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
        /// Failed as a program should on bad input: a non-zero status and an `Error` message on stderr,
        /// no crash (no `Fatal error`, no stack dump).
        public var failedCleanly: Bool {
            status != 0 && stderr.contains("Error") && !stderr.contains("Fatal error") && !stderr.contains("Stack dump")
        }
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

    /// Runs `executable` to its end (killed after `timeout`), `workingDirectory` nil for the test's own.
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                           workingDirectory: String? = nil, timeout: Duration = .seconds(60)) async throws -> Output {
        return try await withTemporaryDirectory("cli-child") { directory in
            let outURL = directory.appendingPathComponent("stdout")
            let errURL = directory.appendingPathComponent("stderr")
            let child = try await SpawnedProcess.start(executable, arguments, environment: environment.map(withSanitizerSettings),
                                                       workingDirectory: workingDirectory, stdout: outURL.path, stderr: errURL.path)
            let exit = child.exit
            let killed = KilledFlag()
            let status: Int32 = await withTaskGroup(of: Int32?.self) { group in
                group.addTask { for await code in exit { return code }; return nil }
                group.addTask {
                    try? await Task.sleep(for: timeout)
                    guard !Task.isCancelled, child.isRunning else { return nil }
                    killed.set()
                    child.signal(SIGKILL)
                    return nil
                }
                var status: Int32 = -1
                for await result in group {
                    if let result {
                        status = result
                        group.cancelAll()
                    }
                }
                return status
            }
            return Output(status: status, stdout: (try? String(contentsOf: outURL, encoding: .utf8)) ?? "",
                          stderr: (try? String(contentsOf: errURL, encoding: .utf8)) ?? "", timedOut: killed.wasKilled)
        }
    }

    /// The path of the product `name` built next to the tests.
    /// - Throws: when it is not there (run `swift build` first).
    public static func builtProduct(_ name: String) throws -> String {
        let path = productsDirectory.appendingPathComponent(name).path
        guard FileManager.default.isExecutableFile(atPath: path) else { throw MissingProduct(name: name, path: path) }
        return path
    }

    /// A product the tests run is not built.
    public struct MissingProduct: Error, CustomStringConvertible {
        public var name: String
        public var path: String
        public var description: String { "\(name) not built next to the tests (\(path)); run `swift build` first" }
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

/// Whether the test killed the child for running too long.
final class KilledFlag: Sendable {
    private let killed = Locked(false)
    func set() { killed.withLock { $0 = true } }
    var wasKilled: Bool { killed.withLock { $0 } }
}
