import Foundation
import NIOCore
import NIOPosix
import NIOSSL

extension APNSSimulator {
    /// TLS settings: ALPN h2, TLS 1.2+, optional client certificates.
    static func makeTLSContext(
        _ certificates: SimulatorCertificates,
        configuration: APNSSimulatorConfiguration
    ) throws -> NIOSSLContext {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: certificates.chain.map { .certificate($0) },
            privateKey: .privateKey(certificates.privateKey)
        )
        tls.applicationProtocols = ["h2"]
        tls.minimumTLSVersion = .tlsv12
        if let caPEM = configuration.trustedClientCAPEM {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(caPEM.utf8)))
            } catch {
                throw APNSSimulatorError.invalidConfiguration("trustedClientCAPEM is not PEM: \(error)")
            }
            tls.certificateVerification = configuration.requireClientCertificate ? .noHostnameVerification : .optionalVerification
        } else if configuration.requireClientCertificate {
            throw APNSSimulatorError.invalidConfiguration("requireClientCertificate needs trustedClientCAPEM")
        }
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw APNSSimulatorError.invalidConfiguration("TLS setup failed: \(error)")
        }
    }

    /// Sets up one accepted connection: TLS, HTTP/2 and the connection handler (which answers every stream).
    static func initializeConnection(
        _ channel: any Channel,
        core: SimulatorCore,
        sslContext: NIOSSLContext
    ) throws {
        let faults = core.faults
        let limit = core.maxConcurrentStreams(faults)
        let initialLimit = core.rampUpConcurrentStreams ? 1 : limit
        let loop = channel.eventLoop
        let handle = core.state.withLock { state in
            state.openConnection { id in
                let handler = SimulatorConnectionHandler(
                    id: id, core: core, initialMaxStreams: initialLimit, rampedUp: !core.rampUpConcurrentStreams
                )
                return ConnectionHandle(id: id, channel: channel, handler: NIOLoopBound(handler, eventLoop: loop))
            }
        }
        guard let handle else {
            channel.close(promise: nil)
            return
        }
        let connection = handle.handler.value
        if faults.unresponsive { try channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false) }
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(NIOSSLServerHandler(context: sslContext))
        // HTTP/2 itself is the connection handler's (HTTP2ServerFraming): no NIOHTTP2Handler, no child channels.
        try sync.addHandler(connection)
    }

    /// Binds the HTTP/2 listener and the admin listener.
    func bind() async throws -> (server: any Channel, admin: (any Channel)?, port: Int, adminPort: Int?) {
        let certificates = try self.certificatesResult.get()
        let sslContext = try Self.makeTLSContext(certificates, configuration: configuration)
        let core = self.core
        let server: any Channel
        do {
            server = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try Self.initializeConnection(channel, core: core, sslContext: sslContext)
                    }
                }
                .bind(host: configuration.host, port: configuration.port)
                .get()
        } catch {
            throw APNSSimulatorError(
                code: .startFailed, message: "cannot listen on \(configuration.host):\(configuration.port): \(error)",
                isRetryable: true
            )
        }
        guard let port = server.localAddress?.port else {
            try? await server.close()
            throw APNSSimulatorError(code: .startFailed, message: "listener has no local port")
        }
        var admin: (any Channel)?
        var adminPort: Int?
        if let requested = configuration.adminPort {
            do {
                let channel = try await AdminServer.bind(
                    group: group, host: configuration.host, port: requested,
                    api: AdminAPI(core: core, caCertificatePEM: certificates.caCertificatePEM)
                )
                admin = channel
                adminPort = channel.localAddress?.port
            } catch {
                try? await server.close()
                throw APNSSimulatorError(
                    code: .startFailed, message: "cannot listen on admin port \(requested): \(error)", isRetryable: true
                )
            }
        }
        return (server, admin, port, adminPort)
    }
}
