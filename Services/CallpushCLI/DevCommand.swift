import ArgumentParser
import CallTracing
import Foundation
import Logging
import ServiceLifecycle
import Locking

/// `callpush dev`: everything on embedded defaults in one process.
struct DevCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev",
        abstract: "Run callpush on embedded defaults: embedded Kafka, the APNs simulator, dispatch and push-workers.",
        discussion: """
            Starts librdkafka's mock cluster (reachable by any Kafka client on the printed bootstrap \
            address) with the three topics, the APNs simulator with a generated certificate and token \
            key, push-workers that deliver to it, and dispatch on 127.0.0.1 with a generated API key. \
            Prints the API key, the URLs and a curl line that rings a simulated phone. Ctrl-C stops \
            everything cleanly. Dispatch and the workers trace every call into a local collector on \
            127.0.0.1:--trace-port that keeps the last spans: `callpush status <callId> --trace` shows \
            them as a timeline. With OTEL_EXPORTER_OTLP_ENDPOINT set, spans go to that collector instead.
            """
    )

    @Option(help: "Brokers in the embedded Kafka cluster.")
    var brokers = 3

    @Option(help: "Partitions of the requests and status topics.")
    var partitions = 6

    @Option(help: "Push-workers to run (members of one consumer group).")
    var workers = 2

    @Option(help: "Port of dispatch's HTTP API on 127.0.0.1 (0: any free port).")
    var port = 8080

    @Flag(help: "Ring a few demo calls (sent, dead token, cancelled, expired during an outage) and show their status live.")
    var demo = false

    @Option(help: "Write a JSON description of the running system (addresses, topics, CA path) here once it is ready.")
    var stateFile: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "notice"

    @Option(help: "Port of the local trace collector on 127.0.0.1 (0: any free port, -1: no collector, no tracing).")
    var tracePort = 4318

    @Option(help: "Spans the local trace collector keeps (the oldest are forgotten first).")
    var traceSpans = 20_000

    func validate() throws {
        guard (1...9).contains(brokers) else { throw ValidationError("--brokers must be between 1 and 9") }
        guard (1...256).contains(partitions) else { throw ValidationError("--partitions must be between 1 and 256") }
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        guard (1...16).contains(workers) else { throw ValidationError("--workers must be between 1 and 16") }
        guard (-1...65_535).contains(tracePort) else { throw ValidationError("--trace-port must be between -1 and 65535") }
        guard (100...1_000_000).contains(traceSpans) else { throw ValidationError("--trace-spans must be between 100 and 1000000") }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    func run() async throws {
        var logger = Logger(label: "callpush.dev")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .notice
        let stack: DevStack
        do {
            var options = DevStack.Options(brokers: brokers, partitions: partitions, workers: workers, dispatchPort: port)
            options.traces = try traces(environment: ProcessInfo.processInfo.environment)
            stack = try await DevStack.start(options, logger: logger)
        } catch {
            FileHandle.standardError.write(Data("callpush dev: could not start: \(error)\n".utf8))
            throw ExitCode.failure
        }
        let group = ServiceGroup(configuration: .init(services: stack.services.map { .init(service: $0) },
                                                      gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        let ended = Locked(false)
        let running = Task {
            defer { ended.withLock { $0 = true } }
            try await group.run()
        }
        let state: DevState
        do {
            state = try await stack.ready(abandonIf: { ended.withLock { $0 } })
        } catch {
            await group.triggerGracefulShutdown()
            var reason = "\(error)"
            if case .failure(let failure) = await running.result { reason = "\(failure)" }
            if port != 0 && reason.localizedCaseInsensitiveContains("address already in use") {
                reason += " (port \(port) is taken: pass --port 0 for any free port)"
            }
            FileHandle.standardError.write(Data("callpush dev: could not start: \(reason)\n".utf8))
            throw ExitCode.failure
        }
        FileHandle.standardOutput.write(Data((DevStack.banner(state) + "\n").utf8))
        if let stateFile {
            try state.write(to: stateFile)
        }
        if demo {
            do {
                try await DevDemo(stack: stack, state: state).run()
            } catch {
                FileHandle.standardError.write(Data("callpush dev --demo: \(error)\n".utf8))
            }
        }
        do {
            try await running.value
        } catch {
            FileHandle.standardError.write(Data("callpush dev: \(error)\n".utf8))
            throw ExitCode.failure
        }
        FileHandle.standardOutput.write(Data("callpush dev: stopped\n".utf8))
    }

    /// The collector the `OTEL_*` variables name, else the local one (unless --trace-port -1 or
    /// the variables turn tracing off).
    func traces(environment: [String: String]) throws -> DevTraces {
        if let settings = try TracingEnvironment.settings(environment) { return .collector(settings) }
        if tracePort < 0 || TracingEnvironment.isDisabled(environment) { return .off }
        return .local(port: tracePort, capacity: traceSpans)
    }
}
