import Foundation
import Locking

/// Where a command writes: results to `out` (stdout), progress and errors to `error` (stderr).
/// Tests pass a capturing output to run the same command logic in-process.
struct CommandOutput: Sendable {
    var out: @Sendable (String) -> Void
    var error: @Sendable (String) -> Void
    func line(_ text: String) { out(text) }

    /// stdout / stderr of the process.
    static let standard = CommandOutput(
        out: { FileHandle.standardOutput.write(Data(($0 + "\n").utf8)) },
        error: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
}

/// Captures a command's output (tests).
final class CapturedOutput: Sendable {
    private let lines = Locked<(out: [String], error: [String])>(([], []))

    var output: CommandOutput {
        CommandOutput(out: { text in self.lines.withLock { $0.out.append(text) } },
                      error: { text in self.lines.withLock { $0.error.append(text) } })
    }

    var out: [String] { lines.withLock { $0.out } }
    var error: [String] { lines.withLock { $0.error } }
}
