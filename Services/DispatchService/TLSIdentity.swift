import Crypto
import Foundation
import HummingbirdCore
import Locking
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle

/// The certificate chain and key dispatch serves HTTPS with, reloaded when the files change
/// (a renewed certificate, a rotated Kubernetes secret) without a restart: every connection
/// accepted after a reload uses the new identity; open connections keep theirs.
public final class TLSIdentity: Service, Sendable {
    private struct Loaded {
        var context: NIOSSLContext
        var digest: [UInt8]
    }

    private let files: TLSFiles
    private let logger: Logger
    private let current: Locked<Loaded>

    /// Loads the files now; throws when they are missing or not a matching PEM chain and key.
    public init(files: TLSFiles, logger: Logger) throws {
        self.files = files
        self.logger = logger
        current = Locked(try Self.load(files))
    }

    /// The context new connections are set up with.
    var context: NIOSSLContext { current.withLock { $0.context } }

    /// Checks the files every `reloadInterval` until shutdown; a change that does not load is
    /// logged and the previous identity kept.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: self.files.reloadInterval)
                self.reloadIfChanged()
            }
        }
    }

    /// Loads the files again if their content changed; true when a new identity is in use.
    @discardableResult
    func reloadIfChanged() -> Bool {
        guard let digest = try? Self.digest(files), digest != current.withLock({ $0.digest }) else { return false }
        do {
            let loaded = try Self.load(files)
            current.withLock { $0 = loaded }
            logger.notice("TLS certificate reloaded", metadata: ["tls.certificate": "\(files.certificateChain)"])
            return true
        } catch {
            logger.error("TLS certificate changed but does not load; keeping the previous one",
                         metadata: ["tls.certificate": "\(files.certificateChain)", "error": "\(error)"])
            return false
        }
    }

    private static func digest(_ files: TLSFiles) throws -> [UInt8] {
        let chain = try Data(contentsOf: URL(fileURLWithPath: files.certificateChain))
        let key = try Data(contentsOf: URL(fileURLWithPath: files.privateKey))
        return Array(SHA256.hash(data: chain + key))
    }

    private static func load(_ files: TLSFiles) throws -> Loaded {
        let digest = try digest(files)
        let chain = try NIOSSLCertificate.fromPEMFile(files.certificateChain).map { NIOSSLCertificateSource.certificate($0) }
        let key = try NIOSSLPrivateKey(file: files.privateKey, format: .pem)
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        return Loaded(context: try NIOSSLContext(configuration: configuration), digest: digest)
    }
}

/// A server child channel that adds TLS with the identity's current context to each new
/// connection, then sets up the HTTP channel under it (Hummingbird's `TLSChannel` keeps one
/// context for the server's life).
struct ReloadingTLSChannel<Base: ServerChildChannel & HTTPChannelHandler>: ServerChildChannel, HTTPChannelHandler {
    typealias Value = Base.Value

    let base: Base
    let identity: TLSIdentity

    var responder: HTTPChannelHandler.Responder { base.responder }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let context = identity.context
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Base.Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
