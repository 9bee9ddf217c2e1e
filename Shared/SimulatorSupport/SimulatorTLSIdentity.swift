import NIOSSL
import SwiftASN1

/// The TLS identity of a simulator, ready for NIOSSL: the server chain and key, and the CA certificate
/// clients must trust. Both simulators (APNs and FCM) make theirs here.
public struct SimulatorTLSIdentity: @unchecked Sendable {
    // @unchecked: NIOSSLCertificate and NIOSSLPrivateKey are immutable reference wrappers that NIOSSL
    // shares across threads itself; they are not marked Sendable in every NIOSSL version.

    /// Leaf first.
    public var chain: [NIOSSLCertificate]
    /// The leaf's private key. Never logged.
    public var privateKey: NIOSSLPrivateKey
    /// The certificate clients must trust (the generated CA, or the last certificate of a given chain).
    public var caCertificatePEM: String

    /// A fresh CA and a server certificate signed by it (see ``GeneratedTLSIdentity``).
    public static func generated(caCommonName: String) throws(SimulatorTLSIdentityError) -> SimulatorTLSIdentity {
        let identity: GeneratedTLSIdentity
        do {
            identity = try GeneratedTLSIdentity.generate(caCommonName: caCommonName)
        } catch {
            throw SimulatorTLSIdentityError(message: "\(error)")
        }
        do {
            return SimulatorTLSIdentity(
                chain: try NIOSSLCertificate.fromPEMBytes(Array(identity.certificateChainPEM.utf8)),
                privateKey: try NIOSSLPrivateKey(bytes: Array(identity.privateKeyPEM.utf8), format: .pem),
                caCertificatePEM: identity.caCertificatePEM)
        } catch {
            throw SimulatorTLSIdentityError(message: "cannot load the generated certificate: \(error)")
        }
    }

    /// A PEM chain (leaf first) and a PEM key from files; the CA clients must trust is the chain's last certificate.
    public static func files(chainPath: String, keyPath: String) throws(SimulatorTLSIdentityError) -> SimulatorTLSIdentity {
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        let last: NIOSSLCertificate
        do {
            chain = try NIOSSLCertificate.fromPEMFile(chainPath)
            key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        } catch {
            throw SimulatorTLSIdentityError(message: "cannot load TLS files (\(chainPath), \(keyPath)): \(error)")
        }
        guard let lastCertificate = chain.last else {
            throw SimulatorTLSIdentityError(message: "certificate file \(chainPath) holds no certificate")
        }
        last = lastCertificate
        do {
            let pem = PEMDocument(type: "CERTIFICATE", derBytes: try last.toDERBytes()).pemString
            return SimulatorTLSIdentity(chain: chain, privateKey: key, caCertificatePEM: pem)
        } catch {
            throw SimulatorTLSIdentityError(message: "cannot encode the CA certificate of \(chainPath): \(error)")
        }
    }
}

/// A simulator's TLS identity could not be made or loaded.
public struct SimulatorTLSIdentityError: Error, Sendable, CustomStringConvertible {
    /// What failed (names the file; never key material).
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
