import Foundation
import Logging

/// The logger commands give the Kafka layer: quiet unless CALLPUSH_LOG_LEVEL asks for more,
/// so errors stay one line.
enum CLILogger {
    static func make(_ label: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = environment["CALLPUSH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        return logger
    }
}
