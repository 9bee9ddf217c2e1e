import ArgumentParser
import Logging
import NIOPosix
import ServiceLifecycle
import SimulatorSupport

/// The command-line options both simulator programs (`apns-simulator`, `fcm-simulator`) have: where to
/// listen, the TLS identity, the admin switch, threads and logging. Each program adds its own ports and
/// protocol options.
public struct SimulatorCommonOptions: ParsableArguments {
    @Option(help: "Interface to listen on.")
    public var host: String = "127.0.0.1"

    @Flag(name: .customLong("no-admin"), help: "Do not start the admin API.")
    public var noAdmin = false

    @Option(help: "PEM certificate chain (leaf first). Without --cert/--key a CA and certificate are generated.")
    public var cert: String?

    @Option(help: "PEM private key for --cert.")
    public var key: String?

    @Option(name: .customLong("write-ca"), help: "Write the CA certificate clients must trust to this PEM file.")
    public var writeCA: String?

    @Option(help: "Event-loop threads serving connections (0 = one per core). Like nghttpd's -n; 1 leaves the other cores to a load generator on the same machine.")
    public var threads: Int = 0

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    public var logLevelName: String = "info"

    @Option(name: .customLong("latency-ms"), help: "Fault: answer delay, A (fixed) or A-B (uniform), in ms.")
    public var latencyMs: String?

    public init() {}

    /// The parsed `--log-level`.
    public var logLevel: Logger.Level { Logger.Level(rawValue: logLevelName) ?? .info }

    /// `host` as it goes into a URL (IPv6 in brackets).
    public var hostForURL: String { host.contains(":") ? "[\(host)]" : host }

    public func validate() throws {
        guard Logger.Level(rawValue: logLevelName) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        guard (cert == nil) == (key == nil) else { throw ValidationError("--cert and --key go together") }
        guard (0...1024).contains(threads) else { throw ValidationError("--threads must be in 0...1024 (0 = one per core)") }
    }

    /// The program's `--port` and `--admin-port` are usable.
    public static func validatePorts(port: Int, adminPort: Int) throws {
        guard (0...65535).contains(port), (0...65535).contains(adminPort) else {
            throw ValidationError("--port and --admin-port must be in 0...65535")
        }
    }

    /// Sets where the simulator listens: `--host`, the program's ports (no admin port with `--no-admin`),
    /// and `--cert` / `--key` when given.
    public func configureListener(_ configuration: inout some SimulatorListenerConfiguration, port: Int, adminPort: Int) {
        configuration.host = host
        configuration.port = port
        configuration.adminPort = noAdmin ? nil : adminPort
        if let cert, let key { configuration.tls = .files(certificateChainPEMPath: cert, privateKeyPEMPath: key) }
    }

    /// `--latency-ms` in milliseconds: `maximum` is nil for a fixed `A`; nil without the option.
    public func latencyMilliseconds() throws -> (minimum: Double, maximum: Double?)? {
        guard let latencyMs else { return nil }
        let parts = latencyMs.split(separator: "-", omittingEmptySubsequences: false).map { Double($0) }
        switch parts.count {
        case 1 where parts[0] != nil:
            return (parts[0]!, nil)
        case 2 where parts[0] != nil && parts[1] != nil:
            return (parts[0]!, parts[1]!)
        default:
            throw ValidationError("--latency-ms must be A or A-B (milliseconds), got '\(latencyMs)'")
        }
    }

    /// Runs a simulator's own check (of faults, of a configuration): its ``SimulatorError`` becomes a
    /// usage error with the same message.
    public static func usageChecked<T>(_ check: () throws -> T) throws -> T {
        do {
            return try check()
        } catch let error as SimulatorError {
            throw ValidationError(error.message)
        }
    }

    /// Logs to standard error at `--log-level`.
    public func bootstrapLogging() {
        let level = logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }

    /// A group of `--threads` event loops of the simulator's own, or `nil` for NIO's shared group (one per core).
    public func makeEventLoopGroup() -> MultiThreadedEventLoopGroup? {
        threads > 0 ? MultiThreadedEventLoopGroup(numberOfThreads: threads) : nil
    }
}

/// Runs a simulator until SIGTERM or SIGINT. `start` (bind, then print the ready line) runs inside the service
/// group, after the signals are trapped: a parent that signals as soon as it reads the ready line stops the
/// program gracefully (exit 0) instead of killing it before the group exists.
public func runSimulator(
    _ simulator: some Service, logger: Logger, start: @escaping @Sendable () async throws -> Void
) async throws {
    let group = ServiceGroup(
        services: [StartThenRun(service: simulator, start: start)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
    try await group.run()
}

private struct StartThenRun<Wrapped: Service>: Service {
    let service: Wrapped
    let start: @Sendable () async throws -> Void

    func run() async throws {
        try await start()
        try await service.run()
    }
}
