import Foundation
import Logging

extension Logger {
    /// A test target's logger: at `level` (quiet), unless the environment variable `variable` names
    /// a level (`WORKER_TEST_LOG=debug swift test …` shows what a failing test did).
    public static func quietTestLogger(label: String, levelFrom variable: String, default level: Logger.Level = .error) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = ProcessInfo.processInfo.environment[variable].flatMap(Logger.Level.init(rawValue:)) ?? level
        return logger
    }
}
