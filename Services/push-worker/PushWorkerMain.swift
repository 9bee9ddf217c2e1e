import CallTracing
import CallpushCore
import Foundation
import Logging
import PushWorker
import ServiceLifecycle

/// `push-worker`: configured from the environment (see `WorkerEnvironment`, and
/// `TracingEnvironment` for the `OTEL_*` variables), stops gracefully on SIGTERM / SIGINT.
/// Exit codes: 0 after a graceful stop, 2 for a configuration error, 1 otherwise.
@main
struct PushWorkerMain {
    static func main() async {
        let level = ProcessInfo.processInfo.environment["CALLPUSH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let environment: WorkerEnvironment
        let tracing: TracingBackend?
        do {
            var bootLogger = Logger(label: "callpush.push-worker")
            bootLogger.logLevel = level
            environment = try WorkerEnvironment.load()
            tracing = try TracingEnvironment.load(serviceName: "push-worker", logger: bootLogger)
        } catch {
            FileHandle.standardError.write(Data("push-worker: configuration error: \(error)\n".utf8))
            exit(2)
        }
        // With tracing on, every log line written inside a span carries its trace_id and span_id.
        var logger = tracing.map { Logger(label: "callpush.push-worker", metadataProvider: $0.metadataProvider) } ?? Logger(label: "callpush.push-worker")
        logger.logLevel = level
        for warning in environment.warnings { logger.warning("\(warning)") }
        if let tracing { logger.info("tracing on", metadata: ["otel.endpoint": "\(tracing.destination)"]) }
        do {
            let services = try PushWorkerApp.services(environment, logger: logger, tracing: tracing?.tracing ?? .off)
            // The exporter first: it stops last, after the spans of the drain.
            let group = ServiceGroup(configuration: .init(
                services: ((tracing.map { [$0.service] } ?? []) + services).map { .init(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
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
