import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Locking
import SimulatorSupport

/// An HTTP/2 + TLS server that behaves like the APNs provider API: it validates requests and provider
/// tokens like APNs, answers with APNs statuses and reasons, records accepted pushes and injects faults.
///
/// ```swift
/// let simulator = APNSSimulator(configuration: config, logger: logger)
/// try await simulator.start()
/// // connect to https://127.0.0.1:\(simulator.port), trusting simulator.caCertificatePEM
/// await simulator.stop()
/// ```
/// As a `Service`, `run()` starts it (if needed) and stops it on graceful shutdown or cancellation.
public final class APNSSimulator: Service, Sendable {
    private struct Listeners: Sendable {
        var server: any Channel
        var admin: (any Channel)?
        var port: Int
        var adminPort: Int?
    }

    let configuration: APNSSimulatorConfiguration
    let logger: Logger
    let core: SimulatorCore
    let certificatesResult: Result<SimulatorCertificates, APNSSimulatorError>
    private let lifecycle = Locked(SimulatorLifecycle<Listeners>())
    let group: any EventLoopGroup

    /// Creates a simulator; nothing is bound until ``start()``. A self-signed identity is generated here, so
    /// ``caCertificatePEM`` is valid before starting. `eventLoopGroup` defaults to NIO's shared group; give it
    /// its own group when a client in the same process must not share its threads (benchmarks).
    public init(configuration: APNSSimulatorConfiguration, logger: Logger, eventLoopGroup: (any EventLoopGroup)? = nil) {
        self.configuration = configuration
        self.logger = logger
        self.core = SimulatorCore(configuration: configuration, logger: logger)
        self.group = eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
        do {
            self.certificatesResult = .success(try SimulatorCertificates.make(configuration.tls))
        } catch let error as APNSSimulatorError {
            self.certificatesResult = .failure(error)
        } catch {
            self.certificatesResult = .failure(.invalidConfiguration("\(error)"))
        }
    }

    /// The bound HTTP/2 port (valid after ``start()``; 0 before).
    public var port: Int {
        lifecycle.withLock { $0.running?.port ?? 0 }
    }

    /// The bound admin port, or nil when the admin API is off or not started.
    public var adminPort: Int? {
        lifecycle.withLock { $0.running?.adminPort }
    }

    /// PEM of the certificate clients must trust (the generated CA, or the last certificate of the given chain).
    /// Empty if the TLS identity could not be created (``start()`` then throws).
    public var caCertificatePEM: String {
        (try? certificatesResult.get().caCertificatePEM) ?? ""
    }

    /// Writes ``caCertificatePEM`` to a file.
    public func writeCACertificate(to path: String) throws {
        let pem = try certificatesResult.get().caCertificatePEM
        do {
            try pem.write(toFile: path, atomically: true, encoding: .utf8)
        } catch {
            throw APNSSimulatorError(code: .ioFailed, message: "cannot write \(path): \(error)")
        }
    }

    /// Accepted pushes, oldest first (at most ``APNSSimulatorConfiguration/maxRecordedPushes``).
    public func pushes() -> [RecordedPush] {
        core.state.withLock { $0.pushes.elements }.map(\.recorded)
    }

    /// Forgets the recorded pushes.
    public func resetPushes() {
        core.state.withLock { $0.pushes.removeAll() }
    }

    /// The active faults.
    public var faults: APNSSimulatorFaults {
        core.faults
    }

    /// Replaces the active faults; takes effect for the next stream (and sends new SETTINGS when
    /// `maxConcurrentStreams` changed). Invalid values are clamped; use ``APNSSimulatorFaults/validate()``
    /// first to reject them instead.
    public func setFaults(_ faults: APNSSimulatorFaults) {
        core.setFaults(faults.clamped)
    }

    /// Counters since start.
    public func stats() -> APNSSimulatorStats {
        core.state.withLock { $0.currentStats }
    }

    /// Binds the HTTP/2 listener (and the admin listener). After it returns ``port`` and ``adminPort`` are valid.
    /// Calling it again while running does nothing.
    public func start() async throws {
        let proceed = try lifecycle.withLock { try $0.beginStart() }
        guard proceed else { return }
        do {
            let bound = try await bind()
            let listeners = Listeners(server: bound.server, admin: bound.admin, port: bound.port, adminPort: bound.adminPort)
            guard lifecycle.withLock({ $0.finishStart(listeners) }) else {
                try? await listeners.server.close()
                if let admin = listeners.admin { try? await admin.close() }
                throw SimulatorError.stoppedWhileStarting
            }
            logger.info(
                "APNs simulator ready",
                metadata: ["apns.port": "\(listeners.port)", "apns.admin_port": "\(listeners.adminPort.map(String.init) ?? "off")"]
            )
        } catch {
            lifecycle.withLock { $0.failStart() }
            throw error
        }
    }

    /// Stops listening and closes every connection (after a GOAWAY `Shutdown`). Idempotent.
    public func stop() async {
        let listeners = lifecycle.withLock { $0.stop() }
        let handles = core.state.withLock { state in
            state.stopped = true
            return Array(state.connections.values)
        }
        guard let listeners else { return }
        try? await listeners.server.close()
        if let admin = listeners.admin { try? await admin.close() }
        for handle in handles {
            handle.channel.eventLoop.execute {
                handle.handler.value.sendGoAway(reason: "Shutdown")
            }
            try? await handle.channel.close()
        }
    }

    /// Starts (if needed) and runs until graceful shutdown or cancellation, then stops.
    public func run() async throws {
        try await start()
        let server = lifecycle.withLock { $0.running?.server }
        guard let server else { return }
        await withTaskCancellationOrGracefulShutdownHandler {
            try? await server.closeFuture.get()
        } onCancelOrGracefulShutdown: {
            server.close(promise: nil)
        }
        await stop()
    }
}
