import DispatchService
import Foundation
import Logging
import ServiceLifecycle

/// `dispatch`: configured from the environment (see docs/dispatch.md), stops gracefully on
/// SIGTERM / SIGINT. Exit codes: 0 after a graceful stop, 2 for a configuration error, 1 otherwise.
@main
struct DispatchMain {
    static func main() async {
        var logger = Logger(label: "callpush.dispatch")
        logger.logLevel = ProcessInfo.processInfo.environment["CALLPUSH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let configuration: DispatchConfiguration
        do {
            configuration = try DispatchEnvironment.load()
        } catch {
            FileHandle.standardError.write(Data("dispatch: configuration error: \(error)\n".utf8))
            exit(2)
        }
        for warning in configuration.warnings { logger.warning("\(warning)") }
        do {
            let app = try DispatchApp(configuration: configuration, logger: logger)
            let group = ServiceGroup(configuration: .init(
                services: app.services.map { .init(service: $0) }, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
            try await group.run()
        } catch let error as DispatchConfigurationError {
            FileHandle.standardError.write(Data("dispatch: configuration error: \(error)\n".utf8))
            exit(2)
        } catch {
            FileHandle.standardError.write(Data("dispatch: \(error)\n".utf8))
            exit(1)
        }
    }
}
