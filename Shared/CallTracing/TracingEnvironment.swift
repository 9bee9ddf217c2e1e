import CallpushCore
import Foundation
import Logging
#if CALLPUSH_OTLP
import OTel
#endif
import ServiceLifecycle
import Tracing

/// A tracer exporting spans by OTLP/HTTP, with the service that batches and sends them.
public struct TracingBackend: Sendable {
    /// What the services trace with.
    public let tracing: CallTracing
    /// Exports the spans (batches them, flushes at shutdown). Run it first in the process's
    /// `ServiceGroup`, so it stops last and the spans of the shutdown are exported too.
    public let service: any Service
    /// Puts `trace_id` and `span_id` of the current span into every log line (give it to the
    /// process's loggers).
    public let metadataProvider: Logger.MetadataProvider
    /// Where spans go (the URL without credentials, for the start-up log line).
    public let destination: String
}

/// Turns the standard `OTEL_*` variables into a ``TracingBackend`` — or none: tracing is off
/// unless an OTLP endpoint is configured.
///
/// | variable | meaning |
/// |---|---|
/// | `OTEL_EXPORTER_OTLP_ENDPOINT` | base URL of an OTLP/HTTP collector (`/v1/traces` is appended); setting it turns tracing on |
/// | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` | full URL for traces (used as is); also turns tracing on |
/// | `OTEL_TRACES_EXPORTER` | `otlp` (on, `http://localhost:4318` when no endpoint is set) or `none` (off) |
/// | `OTEL_SDK_DISABLED` | `true`: off whatever else is set |
/// | `OTEL_EXPORTER_OTLP_PROTOCOL` / `…_TRACES_PROTOCOL` | `http/protobuf` (default) or `http/json`; gRPC is not built in |
/// | `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` | resource (default service name: the program's) |
/// | `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG` | sampler (default `parentbased_always_on`) |
/// | `OTEL_PROPAGATORS` | `tracecontext` (the default; the only one callpush carries) |
/// | `OTEL_EXPORTER_OTLP_HEADERS`, `…_TIMEOUT`, `…_COMPRESSION`, `…_CERTIFICATE`, `…_CLIENT_KEY`, `…_CLIENT_CERTIFICATE`, `OTEL_BSP_*`, `OTEL_LOG_LEVEL` | as the OpenTelemetry specification defines them (swift-otel reads them) |
///
/// Values swift-otel would stop the process on (a gRPC protocol, the baggage or B3 propagators,
/// the Jaeger or X-Ray samplers) are refused here with a ``ConfigurationError`` naming the
/// variable, as are malformed endpoints.
public enum TracingEnvironment {
    /// What the environment asks for once checked; nil from ``settings(_:)`` means off.
    public struct Settings: Sendable, Equatable {
        /// The traces URL, when one is set (else swift-otel's default, `http://localhost:4318/v1/traces`).
        public var tracesEndpoint: String?
        /// `http/json` rather than `http/protobuf`.
        public var json: Bool
    }

    /// The backend the environment configures, or nil when tracing is off.
    ///
    /// - Parameter serviceName: `service.name` unless `OTEL_SERVICE_NAME` says otherwise.
    public static func load(serviceName: String, environment: [String: String] = ProcessInfo.processInfo.environment,
                            logger: Logger) throws(ConfigurationError) -> TracingBackend? {
        guard let settings = try settings(environment) else { return nil }
        return try makeBackend(serviceName: serviceName, tracesEndpoint: settings.tracesEndpoint, json: settings.json, logger: logger)
    }

    /// Whether the variables turn tracing off explicitly (`OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`).
    public static func isDisabled(_ env: [String: String]) -> Bool {
        env["OTEL_SDK_DISABLED"]?.lowercased() == "true" || env["OTEL_TRACES_EXPORTER"]?.lowercased() == "none"
    }

    /// Checks the tracing variables; nil when tracing is off.
    public static func settings(_ env: [String: String]) throws(ConfigurationError) -> Settings? {
        func value(_ key: String) -> String? {
            env[key].map { $0.trimmingCharacters(in: .whitespaces) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        switch value("OTEL_SDK_DISABLED")?.lowercased() {
        case nil, "false": break
        case "true": return nil
        default: throw ConfigurationError("OTEL_SDK_DISABLED", "expected true or false")
        }
        let exporter = value("OTEL_TRACES_EXPORTER")?.lowercased()
        switch exporter {
        case nil, "otlp": break
        case "none": return nil
        default: throw ConfigurationError("OTEL_TRACES_EXPORTER", "expected otlp or none (callpush exports traces by OTLP/HTTP)")
        }
        let tracesKey = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", sharedKey = "OTEL_EXPORTER_OTLP_ENDPOINT"
        var endpoint: String?
        if let traces = value(tracesKey) {
            endpoint = try checkedURL(traces, key: tracesKey)
        } else if let shared = value(sharedKey) {
            let base = try checkedURL(shared, key: sharedKey)
            endpoint = base.hasSuffix("/") ? base + "v1/traces" : base + "/v1/traces"
        }
        guard exporter == "otlp" || endpoint != nil else { return nil }

        let protocolKey = value("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") != nil ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL"
        var json = false
        switch value(protocolKey) {
        case nil, "http/protobuf": break
        case "http/json": json = true
        case "grpc": throw ConfigurationError(protocolKey, "OTLP/gRPC is not built in: use http/protobuf (a collector's port 4318)")
        default: throw ConfigurationError(protocolKey, "expected http/protobuf or http/json")
        }
        let samplers = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"]
        if let sampler = value("OTEL_TRACES_SAMPLER") {
            guard samplers.contains(sampler) else {
                throw ConfigurationError("OTEL_TRACES_SAMPLER", "expected one of \(samplers.joined(separator: ", "))")
            }
            if sampler.hasSuffix("traceidratio"), let argument = value("OTEL_TRACES_SAMPLER_ARG") {
                guard let ratio = Double(argument), (0...1).contains(ratio) else {
                    throw ConfigurationError("OTEL_TRACES_SAMPLER_ARG", "expected a sampling ratio from 0 to 1")
                }
            }
        }
        if let propagators = value("OTEL_PROPAGATORS") {
            for propagator in propagators.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) })
            where propagator != "tracecontext" && propagator != "none" {
                throw ConfigurationError("OTEL_PROPAGATORS", "callpush carries W3C trace context only: expected tracecontext, got \(propagator.prefix(40))")
            }
        }
        return Settings(tracesEndpoint: endpoint, json: json)
    }

    /// A backend exporting to `tracesEndpoint` (nil: the environment's or swift-otel's default).
    /// Values in the process environment (`OTEL_*`) still apply on top, as the OpenTelemetry
    /// specification wants. `scheduleDelay`: how long finished spans wait to be batched
    /// (default 5 s; `callpush dev` and tests want them at once).
    public static func makeBackend(serviceName: String, tracesEndpoint: String?, json: Bool = false,
                                   scheduleDelay: Duration? = nil, logger: Logger) throws(ConfigurationError) -> TracingBackend {
        #if CALLPUSH_OTLP
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.diagnosticLogger = .custom(Logger(label: "callpush.otel", factory: { _ in RedactingLogHandler(base: logger.handler) }))
        configuration.diagnosticLogLevel = .warning
        configuration.traces.otlpExporter.protocol = json ? .httpJSON : .httpProtobuf
        if let tracesEndpoint { configuration.traces.otlpExporter.endpoint = tracesEndpoint }
        if let scheduleDelay { configuration.traces.batchSpanProcessor.scheduleDelay = scheduleDelay }
        do {
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            return TracingBackend(tracing: CallTracing(tracer: backend.factory), service: backend.service,
                                  metadataProvider: OTel.makeLoggingMetadataProvider(),
                                  destination: redacted(tracesEndpoint ?? "http://localhost:4318/v1/traces"))
        } catch {
            throw ConfigurationError("OTEL_EXPORTER_OTLP_ENDPOINT", "the OTLP exporter cannot be set up: \(error)")
        }
        #else
        throw ConfigurationError("OTEL_EXPORTER_OTLP_ENDPOINT", "this build has no OTLP exporter (built with CALLPUSH_WITHOUT_OTLP)")
        #endif
    }

    /// Whether this build can export spans (every build but the ThreadSanitizer one; see Package.swift).
    public static var hasOTLPExporter: Bool {
        #if CALLPUSH_OTLP
        true
        #else
        false
        #endif
    }

    /// The URL when it is http(s) with a host.
    static func checkedURL(_ text: String, key: String) throws(ConfigurationError) -> String {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = url.host, !host.isEmpty else {
            throw ConfigurationError(key, "expected an http:// or https:// URL")
        }
        return text
    }

    /// A URL without user, password or query (which may hold credentials), for logs.
    static func redacted(_ text: String) -> String {
        guard var components = URLComponents(string: text) else { return "(unparsable URL)" }
        components.user = nil
        components.password = nil
        components.query = nil
        return components.string ?? "(unparsable URL)"
    }
}

/// swift-otel's diagnostic log handler: logs through the service's handler, without the values
/// of `OTEL_EXPORTER_OTLP_*HEADERS` (swift-otel logs every environment override with its value,
/// and those headers usually carry the collector's API key).
struct RedactingLogHandler: LogHandler {
    var base: any LogHandler
    static let valueKeys = ["environment_value", "previous_value", "new_value"]

    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { base.metadataProvider }
        set { base.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        var handler = base
        var event = event
        let variable = handler.metadata["environment_key"] ?? event.metadata?["environment_key"]
        if let variable, "\(variable)".hasSuffix("HEADERS") {
            for key in Self.valueKeys {
                if handler.metadata[key] != nil { handler.metadata[key] = "<redacted>" }
                if event.metadata?[key] != nil { event.metadata?[key] = "<redacted>" }
            }
        }
        handler.log(event: event)
    }
}
