@testable import CallTracing
import CallpushCore
import CallpushTestSupport
import Locking
import Logging
import Testing

/// The `OTEL_*` variables: tracing is off unless an exporter is configured, and values swift-otel
/// would stop the process on are refused at start, naming the variable.
@Suite struct TracingEnvironmentTests {
    @Test func tracingIsOffByDefault() throws {
        #expect(try TracingEnvironment.settings([:]) == nil)
        #expect(try TracingEnvironment.settings(["OTEL_SERVICE_NAME": "dispatch", "OTEL_TRACES_SAMPLER": "always_on"]) == nil)
    }

    @Test func anEndpointTurnsItOn() throws {
        let shared = try #require(try TracingEnvironment.settings(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]))
        #expect(shared.tracesEndpoint == "http://collector:4318/v1/traces", "the shared endpoint is a base URL")
        #expect(shared.json == false, "http/protobuf is the default")
        let traces = try #require(try TracingEnvironment.settings([
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector/custom",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        ]))
        #expect(traces.tracesEndpoint == "https://collector/custom", "the traces endpoint is used as is and wins")
        #expect(traces.json)
        let sidecar = try #require(try TracingEnvironment.settings(["OTEL_TRACES_EXPORTER": "otlp"]))
        #expect(sidecar.tracesEndpoint == nil, "otlp without an endpoint: swift-otel's default, localhost:4318")
    }

    @Test func disablingWinsOverAnEndpoint() throws {
        let endpoint = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]
        #expect(try TracingEnvironment.settings(endpoint.merging(["OTEL_SDK_DISABLED": "true"]) { $1 }) == nil)
        #expect(try TracingEnvironment.settings(endpoint.merging(["OTEL_TRACES_EXPORTER": "none"]) { $1 }) == nil)
        #expect(TracingEnvironment.isDisabled(["OTEL_SDK_DISABLED": "TRUE"]))
    }

    @Test(arguments: [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", ["OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"]),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://collector"]),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"]),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"]),
        ("OTEL_TRACES_EXPORTER", ["OTEL_TRACES_EXPORTER": "jaeger"]),
        ("OTEL_TRACES_EXPORTER", ["OTEL_TRACES_EXPORTER": "console"]),
        ("OTEL_TRACES_SAMPLER", ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_SAMPLER": "jaeger_remote"]),
        ("OTEL_TRACES_SAMPLER_ARG", ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                                     "OTEL_TRACES_SAMPLER_ARG": "1.5"]),
        ("OTEL_PROPAGATORS", ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_PROPAGATORS": "tracecontext,baggage"]),
        ("OTEL_SDK_DISABLED", ["OTEL_SDK_DISABLED": "yes"]),
    ])
    func aWrongValueIsRefusedNamingTheVariable(key: String, env: [String: String]) {
        let error = #expect(throws: ConfigurationError.self) { try TracingEnvironment.settings(env) }
        #expect(error?.key == key)
    }

    @Test func supportedValuesAreAccepted() throws {
        let env = ["OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:secret@collector:4318/", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                   "OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_PROPAGATORS": "tracecontext", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                   "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"]
        let settings = try #require(try TracingEnvironment.settings(env))
        #expect(settings.tracesEndpoint == "https://user:secret@collector:4318/v1/traces")
    }

    /// swift-otel logs each environment override with its value; the exporter's headers hold the
    /// collector's API key.
    @Test func theExportersHeadersNeverReachTheLog() {
        let logs = CapturedLogs()
        let logger = logs.logger("test")
        var redacting = Logger(label: "otel") { _ in RedactingLogHandler(base: logger.handler) }
        redacting.logLevel = .trace
        redacting[metadataKey: "environment_key"] = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
        redacting[metadataKey: "environment_value"] = "x-api-key=s3cr3t"
        redacting[metadataKey: "new_value"] = "[(x-api-key, s3cr3t)]"
        redacting.info("Configuration updated from environment")
        redacting[metadataKey: "environment_key"] = "OTEL_SERVICE_NAME"
        redacting[metadataKey: "environment_value"] = "dispatch"
        redacting.info("Configuration updated from environment")
        let logged = logs.lines
        #expect(logged.count == 2)
        #expect(!logged[0].contains("s3cr3t"), "\(logged[0])")
        #expect(logged[0].contains("<redacted>"))
        #expect(logged[1].contains("dispatch"), "other values stay readable")
    }
}
