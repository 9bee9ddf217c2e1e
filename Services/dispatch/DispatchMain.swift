import CallTracing
import DispatchService
import Foundation
import Logging
import ServiceLifecycle

/// `dispatch`: configured from the environment (see docs/dispatch.md; docs/tracing.md for the
/// `OTEL_*` variables), stops gracefully on SIGTERM / SIGINT. Exit codes: 0 after a graceful
/// stop, 2 for a configuration error, 1 otherwise.
@main
struct DispatchMain {
    static func main() async {
        let level = ProcessInfo.processInfo.environment["CALLPUSH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let configuration: DispatchConfiguration
        let tracing: TracingBackend?
        do {
            var bootLogger = Logger(label: "callpush.dispatch")
            bootLogger.logLevel = level
            configuration = try DispatchEnvironment.load()
            tracing = try TracingEnvironment.load(serviceName: "dispatch", logger: bootLogger)
        } catch {
            FileHandle.standardError.write(Data("dispatch: configuration error: \(error)\n".utf8))
            exit(2)
        }
        // With tracing on, every log line written inside a span carries its trace_id and span_id.
        var logger = tracing.map { Logger(label: "callpush.dispatch", metadataProvider: $0.metadataProvider) } ?? Logger(label: "callpush.dispatch")
        logger.logLevel = level
        for warning in configuration.warnings { logger.warning("\(warning)") }
        if let tracing { logger.info("tracing on", metadata: ["otel.endpoint": "\(tracing.destination)"]) }
        do {
            let app = try DispatchApp(configuration: configuration, logger: logger, tracing: tracing?.tracing ?? .off)
            // The exporter first: it stops last, after the spans of the shutdown.
            let group = ServiceGroup(configuration: .init(
                services: ((tracing.map { [$0.service] } ?? []) + app.services).map { .init(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
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
