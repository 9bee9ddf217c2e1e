import Foundation
import Locking
#if canImport(Glibc)
import Glibc
#endif

/// One run of a child program (simulator, dispatch, a push-worker, kcat) with its output in a log file.
///
/// The campaign and the benchmarks start, signal and finally stop these; the termination handler
/// records how each run ended so a verdict can tell a crash from a kill the caller made itself.
public final class ChildProcess: Sendable {
    /// How a run ended.
    public enum Exit: Sendable, Equatable, CustomStringConvertible {
        case status(Int32)
        case signal(Int32)

        public var description: String {
            switch self {
            case .status(let code): "exit \(code)"
            case .signal(let signal): "signal \(signal)"
            }
        }
    }

    /// Why the caller itself ended the run, if it did.
    public enum Intent: Sendable { case none, killed, stopped }

    private struct State {
        var intent: Intent = .none
    }

    public let name: String
    public let pid: Int32
    public let logPath: String
    private let state = Locked(State())
    /// Set by the termination handler (which holds it before `self` exists).
    private let exited = OneShot<Exit>()

    /// Starts `executable` with `arguments` and extra environment, output appended to `logPath`.
    public init(name: String, executable: String, arguments: [String], environment: [String: String], logPath: String) throws {
        self.name = name
        self.logPath = logPath
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        }
        guard let log = FileHandle(forWritingAtPath: logPath) else {
            throw StackError("cannot open log file \(logPath)")
        }
        log.seekToEndOfFile()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, ours in ours }
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        let exited = self.exited
        process.terminationHandler = { finished in
            exited.set(finished.terminationReason == .uncaughtSignal
                ? .signal(finished.terminationStatus) : .status(finished.terminationStatus))
        }
        defer { try? log.close() }  // the child has its own copy
        try process.run()
        self.pid = process.processIdentifier
    }

    /// How the run ended, `nil` while it runs.
    public var exit: Exit? { exited.value }
    /// Whether the caller ended this run on purpose.
    public var intent: Intent { state.withLock { $0.intent } }

    /// Sends SIGKILL (the campaign's "worker crash").
    public func kill() {
        state.withLock { $0.intent = .killed }
        _ = Glibc.kill(pid, SIGKILL)
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit; SIGKILL after that.
    @discardableResult
    public func stop(timeout: Duration) async -> Exit? {
        let alreadyEnded = state.withLock { state -> Bool in
            if exited.value == nil { state.intent = .stopped }
            return exited.value != nil
        }
        if alreadyEnded { return exit }
        _ = Glibc.kill(pid, SIGTERM)
        if let exit = await waitForExit(timeout: timeout) { return exit }
        _ = Glibc.kill(pid, SIGKILL)
        return await waitForExit(timeout: .seconds(5))
    }

    /// Waits for the run to end, at most `timeout` (`nil` when it still runs).
    public func waitForExit(timeout: Duration) async -> Exit? {
        await exited.wait(timeout: timeout)
    }
}

/// A failure of a process stack (campaign, benchmark) with a message for the operator.
public struct StackError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The path of `program` on `PATH`.
public func which(_ program: String) throws -> String {
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let path = "\(directory)/\(program)"
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    throw StackError("\(program) not found on PATH")
}
