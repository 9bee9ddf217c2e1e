import Foundation
import Hummingbird
import HummingbirdCore
import Locking
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import ServiceLifecycle
import SimulatorSupport

/// An HTTPS server that behaves like FCM's HTTP v1 API and its OAuth2 token endpoint: HTTP/2 (HTTP2Wire) and
/// HTTP/1.1 (Hummingbird) by ALPN, JWT grants checked against its service accounts, bearer tokens checked on `messages:send`, messages
/// validated like FCM, FCM's error JSON, accepted messages recorded, faults injected.
///
/// ```swift
/// let simulator = FCMSimulator(configuration: .init(), logger: logger)
/// try await simulator.start()
/// try simulator.writeServiceAccount(to: path)   // token_uri = https://127.0.0.1:<port>/token
/// // POST https://127.0.0.1:\(simulator.port)/v1/projects/<project>/messages:send, trusting simulator.caCertificatePEM
/// await simulator.stop()
/// ```
/// As a `Service`, `run()` starts it (if needed) and stops it on graceful shutdown or cancellation.
public final class FCMSimulator: Service, Sendable {
    private struct Running: Sendable {
        var group: ServiceGroup
        var task: Task<Void, Never>
        var port: Int
        var adminPort: Int?
    }

    let configuration: FCMSimulatorConfiguration
    let logger: Logger
    let core: FCMSimulatorCore
    private let identity: Result<SimulatorTLSIdentity, FCMSimulatorError>
    private let eventLoopGroup: any EventLoopGroup
    private let lifecycle = Locked(SimulatorLifecycle<Running>())

    /// Creates a simulator; nothing is bound until ``start()``. The TLS identity and (unless given) a service
    /// account are generated here, so ``caCertificatePEM`` and ``serviceAccounts`` are valid before starting.
    /// - Throws: ``FCMSimulatorError`` when a service account cannot be generated.
    public init(configuration: FCMSimulatorConfiguration, logger: Logger, eventLoopGroup: (any EventLoopGroup)? = nil) throws {
        self.configuration = configuration
        self.logger = logger
        self.eventLoopGroup = eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
        var accounts = configuration.serviceAccounts
        if accounts.isEmpty {
            do {
                accounts = [try FCMSimulatorServiceAccount.generate()]
            } catch {
                throw FCMSimulatorError.invalidConfiguration("cannot generate a service account key: \(error)")
            }
        }
        self.core = FCMSimulatorCore(configuration: configuration, accounts: accounts, logger: logger)
        do {
            identity = .success(try .make(configuration.tls, caCommonName: "callpush FCM simulator CA"))
        } catch {
            identity = .failure(error)
        }
    }

    /// The bound HTTPS port (valid after ``start()``; 0 before).
    public var port: Int {
        lifecycle.withLock { $0.running?.port ?? 0 }
    }

    /// The bound admin port, or nil when the admin API is off or not started.
    public var adminPort: Int? {
        lifecycle.withLock { $0.running?.adminPort }
    }

    /// `https://<host>:<port>`: where clients send (`/v1/projects/<project>/messages:send`).
    public var baseURL: String {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return "https://\(host):\(port)"
    }

    /// The token endpoint (`<baseURL>/token`), as written into service-account JSON as `token_uri`.
    public var tokenURI: String { baseURL + "/token" }

    /// The service accounts whose grants are accepted (the generated one when none was given).
    public var serviceAccounts: [FCMSimulatorServiceAccount] { core.accounts }

    /// The first service account as the JSON file a client reads (with its private key; `token_uri` = ``tokenURI``).
    public func serviceAccountJSON() throws -> String {
        try core.accounts[0].json(tokenURI: tokenURI)
    }

    /// Writes ``serviceAccountJSON()`` to `path` (mode 0600: it holds a private key).
    public func writeServiceAccount(to path: String) throws {
        try write(try serviceAccountJSON(), to: path, permissions: 0o600)
    }

    /// The CA certificate clients must trust (PEM). Empty if the TLS identity could not be made (``start()`` then throws).
    public var caCertificatePEM: String {
        (try? identity.get().caCertificatePEM) ?? ""
    }

    /// Writes ``caCertificatePEM`` to `path`.
    public func writeCACertificate(to path: String) throws {
        try write(try identity.get().caCertificatePEM, to: path, permissions: 0o644)
    }

    /// Accepted messages, oldest first (at most ``FCMSimulatorConfiguration/maxRecordedMessages``).
    public func messages() -> [RecordedFCMMessage] {
        core.state.withLock { $0.orderedMessages }
    }

    /// Forgets the recorded messages.
    public func resetMessages() {
        core.state.withLock { $0.clearMessages() }
    }

    /// The active faults.
    public var faults: FCMSimulatorFaults {
        core.state.withLock { $0.faults }
    }

    /// Replaces the active faults (from the next request). Use ``FCMSimulatorFaults/validate()`` first to refuse bad values.
    public func setFaults(_ faults: FCMSimulatorFaults) {
        core.state.withLock { $0.faults = faults }
    }

    /// Counters since start.
    public func stats() -> FCMSimulatorStats {
        core.state.withLock { $0.currentStats }
    }

    /// Forgets every access token issued: requests with them get 401 `UNAUTHENTICATED` (clients must renew).
    public func revokeAccessTokens() {
        core.state.withLock { $0.revokeAccessTokens() }
    }

    /// Issues an access token for the first service account without a JWT grant (benchmarks, `curl`):
    /// like `gcloud auth print-access-token`. Returns the token and its lifetime in seconds.
    public func issueAccessToken() -> (token: String, expiresInSeconds: Int) {
        let lifetime = core.state.withLock { $0.faults.accessTokenLifetimeSeconds }
        let issued = core.issueAccessToken(for: core.accounts[0], lifetimeSeconds: lifetime, now: configuration.clock.now())
        return (issued.token, issued.seconds)
    }

    /// Binds the HTTPS listener (and the admin listener). After it returns ``port`` and ``adminPort`` are valid.
    /// Calling it again while running does nothing.
    public func start() async throws {
        let proceed = try lifecycle.withLock { try $0.beginStart() }
        guard proceed else { return }
        do {
            let running = try await launch()
            core.audiences.withLock { $0 = [tokenURIFor(port: running.port)] }
            guard lifecycle.withLock({ $0.finishStart(running) }) else {
                await running.group.triggerGracefulShutdown()
                await running.task.value
                throw SimulatorError.stoppedWhileStarting
            }
            logger.info(
                "FCM simulator ready",
                metadata: ["fcm.port": "\(running.port)", "fcm.admin_port": "\(running.adminPort.map(String.init) ?? "off")"])
        } catch {
            lifecycle.withLock { $0.failStart() }
            throw error
        }
    }

    /// Stops listening and closes the connections (gracefully: requests in flight are answered). Idempotent.
    public func stop() async {
        let running = lifecycle.withLock { $0.stop() }
        guard let running else { return }
        await running.group.triggerGracefulShutdown()
        await running.task.value
    }

    /// Starts (if needed) and runs until graceful shutdown or cancellation, then stops.
    public func run() async throws {
        try await start()
        try? await gracefulShutdown()
        await stop()
    }

    // MARK: - Internals

    private func tokenURIFor(port: Int) -> String {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return "https://\(host):\(port)/token"
    }

    private func write(_ text: String, to path: String, permissions: Int) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: permissions]) else {
            throw FCMSimulatorError(code: .ioFailed, message: "cannot write \(path)")
        }
    }

    /// Runs the two Hummingbird applications in a service group of their own and waits until both listen
    /// (or the group ends, e.g. because a port is taken).
    private func launch() async throws -> Running {
        let identity = try self.identity.get()
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: identity.chain.map { .certificate($0) }, privateKey: .privateKey(identity.privateKey))
        tls.minimumTLSVersion = .tlsv12
        let (ports, continuation) = AsyncStream<(String, Int)>.makeStream()
        let core = self.core
        tls.applicationProtocols = ["h2", "http/1.1"]
        // A closing connection waits this long for the client's close_notify (NIOSSL's default is 5 s, which every
        // stop() with a client still connected would take).
        tls.shutdownTimeout = .seconds(1)
        let sslContext: NIOSSLContext
        do {
            sslContext = try NIOSSLContext(configuration: tls)
        } catch {
            throw FCMSimulatorError.invalidConfiguration("TLS setup failed: \(error)")
        }
        // HTTP/2 by HTTP2Wire, HTTP/1.1 by Hummingbird (FCMServerChannel); idle HTTP/1.1 connections close after 5 minutes.
        let server = HTTPServerBuilder { responder in
            FCMServerChannel(
                sslContext: sslContext, http1: HTTP1Channel(responder: responder, configuration: .init(idleTimeout: .seconds(300))),
                core: core)
        }
        let main = Application(
            responder: CallbackResponder<BasicRequestContext> { request, _ in await core.respond(request) },
            server: server,
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: nil, backlog: 256,
                availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections)),
            onServerRunning: { channel in continuation.yield(("main", channel.localAddress?.port ?? 0)) },
            eventLoopGroupProvider: .shared(eventLoopGroup), logger: logger)
        var services: [any Service] = [main]
        if let adminPort = configuration.adminPort {
            services.append(Application(
                router: FCMAdminRouter.make(simulator: self),
                configuration: .init(address: .hostname(configuration.host, port: adminPort), serverName: nil, backlog: 64),
                onServerRunning: { channel in continuation.yield(("admin", channel.localAddress?.port ?? 0)) },
                eventLoopGroupProvider: .shared(eventLoopGroup), logger: logger))
        }
        let group = ServiceGroup(configuration: .init(services: services, logger: logger))
        let failure = Locked<(any Error)?>(nil)
        let task = Task {
            do {
                try await group.run()
            } catch {
                failure.withLock { $0 = error }
            }
            continuation.finish()
        }
        var bound: [String: Int] = [:]
        for await (name, port) in ports {
            bound[name] = port
            if bound["main"] != nil, configuration.adminPort == nil || bound["admin"] != nil { break }
        }
        guard let port = bound["main"], configuration.adminPort == nil || bound["admin"] != nil else {
            await group.triggerGracefulShutdown()
            await task.value
            let reason = failure.withLock { $0 }.map { "\($0)" } ?? "listener ended"
            throw FCMSimulatorError(code: .startFailed, message: "cannot listen on \(configuration.host):\(configuration.port) / admin \(configuration.adminPort.map(String.init) ?? "off"): \(reason)")
        }
        return Running(group: group, task: task, port: port, adminPort: bound["admin"])
    }
}
