import Foundation
import Synchronization

/// Runs a child process to completion, killed after `timeout` (tests stay bounded).
enum ChildProcess {
    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
        var timedOut: Bool
        var stderrLines: [String] { stderr.split(separator: "\n").map(String.init) }
    }

    /// The directory holding the built executables (the test bundle sits next to them).
    static var productsDirectory: URL { URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent() }

    /// The repository root (this file is Tests/CallpushCLITests/ChildProcess.swift).
    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                    timeout: Duration = .seconds(60)) async throws -> Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cli-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outURL = directory.appendingPathComponent("stdout")
        let errURL = directory.appendingPathComponent("stderr")
        FileManager.default.createFile(atPath: outURL.path, contents: nil)
        FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        process.standardOutput = out
        process.standardError = err
        let killed = Mutex(false)
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
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
                if process.isRunning {
                    killed.withLock { $0 = true }
                    kill(pid, SIGKILL)
                }
            }
        }
        try? out.close()
        try? err.close()
        return Output(status: status, stdout: (try? String(contentsOf: outURL, encoding: .utf8)) ?? "",
                      stderr: (try? String(contentsOf: errURL, encoding: .utf8)) ?? "", timedOut: killed.withLock { $0 })
    }

    /// `name` on PATH, or nil.
    static func findExecutable(_ name: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}
