import CallpushCore
import Foundation
import Logging
import PushWorker
import ServiceLifecycle

/// `push-worker`: configured from the environment (see `WorkerEnvironment`), stops gracefully on
/// SIGTERM / SIGINT. Exit codes: 0 after a graceful stop, 2 for a configuration error, 1 otherwise.
@main
struct PushWorkerMain {
    static func main() async {
        var logger = Logger(label: "callpush.push-worker")
        logger.logLevel = ProcessInfo.processInfo.environment["CALLPUSH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let environment: WorkerEnvironment
        do {
            environment = try WorkerEnvironment.load()
        } catch {
            FileHandle.standardError.write(Data("push-worker: configuration error: \(error)\n".utf8))
            exit(2)
        }
        for warning in environment.warnings { logger.warning("\(warning)") }
        do {
            let services = try PushWorkerApp.services(environment, logger: logger)
            let group = ServiceGroup(configuration: .init(
                services: services.map { .init(service: $0) }, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
            try await group.run()
        } catch let error as ConfigurationError {
            FileHandle.standardError.write(Data("push-worker: configuration error: \(error)\n".utf8))
            exit(2)
        } catch {
            FileHandle.standardError.write(Data("push-worker: \(error)\n".utf8))
            exit(1)
        }
    }
}
