import Foundation
import Logging
import ServiceLifecycle

/// How a callpush service program (`dispatch`, `push-worker`) starts and stops: its settings and
/// the `OTEL_*` tracing settings from the environment, a logger at `CALLPUSH_LOG_LEVEL` that
/// carries the current span's ids, its services in one `ServiceGroup` behind the span exporter,
/// graceful stop on SIGTERM / SIGINT. Exit codes: 0 after a graceful stop, 2 for a configuration
/// error, 1 otherwise.
public enum ServiceProgram {
    /// Runs the program `name` (also its log label `callpush.<name>` and its default service name).
    ///
    /// - Parameters:
    ///   - load: reads the program's settings from the environment.
    ///   - warnings: what the settings warn about (logged at start).
    ///   - isConfigurationError: whether an error building the services is a configuration error.
    ///   - services: builds the program's services.
    public static func run<Settings>(
        _ name: String,
        load: @Sendable () throws -> Settings,
        warnings: @Sendable (Settings) -> [String],
        isConfigurationError: @Sendable (any Error) -> Bool,
        services: @Sendable (Settings, Logger, CallTracing) throws -> [any Service]
    ) async -> Never {
        let label = "callpush.\(name)"
        let level = ProcessInfo.processInfo.environment["CALLPUSH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let settings: Settings
        let tracing: TracingBackend?
        do {
            var bootLogger = Logger(label: label)
            bootLogger.logLevel = level
            settings = try load()
            tracing = try TracingEnvironment.load(serviceName: name, logger: bootLogger)
        } catch {
            fail("\(name): configuration error: \(error)", code: 2)
        }
        // With tracing on, every log line written inside a span carries its trace_id and span_id.
        var logger = tracing.map { Logger(label: label, metadataProvider: $0.metadataProvider) } ?? Logger(label: label)
        logger.logLevel = level
        for warning in warnings(settings) { logger.warning("\(warning)") }
        if let tracing { logger.info("tracing on", metadata: ["otel.endpoint": "\(tracing.destination)"]) }
        do {
            let programServices = try services(settings, logger, tracing?.tracing ?? .off)
            // The exporter first: it stops last, after the spans of the shutdown.
            let group = ServiceGroup(configuration: .init(
                services: ((tracing.map { [$0.service] } ?? []) + programServices).map { .init(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
            try await group.run()
        } catch {
            if isConfigurationError(error) { fail("\(name): configuration error: \(error)", code: 2) }
            fail("\(name): \(error)", code: 1)
        }
        exit(0)
    }

    private static func fail(_ message: String, code: Int32) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(code)
    }
}
