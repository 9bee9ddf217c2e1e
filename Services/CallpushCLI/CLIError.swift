import ArgumentParser
import Kafka

/// A failure a `callpush` command reports as one line on stderr, with a stable ``code`` and
/// the process exit status it ends with.
struct CLIError: Error, Sendable, CustomStringConvertible {
    /// Stable machine code (`kafka-unreachable`, `not-found`, …).
    var code: String
    /// The line printed after `callpush <command>: `.
    var message: String
    /// The process exit status.
    var exitCode: Int32

    init(_ code: String, _ message: String, exitCode: Int32 = CLIExit.failure) {
        self.code = code
        self.message = message
        self.exitCode = exitCode
    }

    var description: String { message }

    static func kafkaUnreachable(_ bootstrap: String, timeout: Duration, _ error: KafkaError) -> CLIError {
        CLIError("kafka-unreachable", "cannot reach Kafka at \(bootstrap) within \(DurationArgument.format(timeout)) (\(error.code))",
                 exitCode: CLIExit.unavailable)
    }

    static func kafka(_ what: String, _ error: KafkaError) -> CLIError {
        CLIError("kafka-error", "\(what): \(error.message) (\(error.code))")
    }

    static func usage(_ message: String) -> CLIError {
        CLIError("usage", message, exitCode: CLIExit.usage)
    }
}

/// The exit statuses of `callpush` (documented in docs/cli.md).
enum CLIExit {
    static let success: Int32 = 0
    /// A command failed (Kafka error, HTTP error, refused topic layout, …).
    static let failure: Int32 = 1
    /// `status`: no status for the call in the window.
    static let notFound: Int32 = 3
    /// A bad flag or value (ArgumentParser's validation status).
    static let usage: Int32 = 64
    /// Kafka or dispatch could not be reached in time.
    static let unavailable: Int32 = 69
    /// Interrupted by SIGINT / SIGTERM.
    static let interrupted: Int32 = 130
}

/// Runs a command body; a ``CLIError`` (or any other error) becomes one line on stderr
/// and an `ExitCode`, never a stack trace.
enum CommandRunner {
    static func run(_ name: String, output: CommandOutput = .standard, _ body: () async throws -> Int32) async throws {
        let status: Int32
        do {
            status = try await body()
        } catch let error as CLIError {
            output.error("callpush \(name): \(error.message)")
            throw ExitCode(error.exitCode)
        } catch let error as KafkaError {
            output.error("callpush \(name): \(error.message) (\(error.code))")
            throw ExitCode(CLIExit.failure)
        } catch let error as ExitCode {
            throw error
        } catch {
            output.error("callpush \(name): \(error)")
            throw ExitCode(CLIExit.failure)
        }
        if status != CLIExit.success { throw ExitCode(status) }
    }
}
