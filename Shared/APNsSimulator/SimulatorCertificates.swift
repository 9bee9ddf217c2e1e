import Foundation
import NIOSSL
@_exported import SimulatorSupport

/// The TLS identity of a simulator: the server chain and key, and the CA certificate clients must trust.
struct SimulatorCertificates {
    var chain: [NIOSSLCertificate]
    var privateKey: NIOSSLPrivateKey
    var caCertificatePEM: String

    /// Loads PEM files or generates a fresh CA plus a server certificate signed by it.
    static func make(_ tls: APNSSimulatorConfiguration.TLS) throws -> SimulatorCertificates {
        let identity = try SimulatorTLSIdentity.make(tls, caCommonName: "callpush APNs simulator CA")
        return SimulatorCertificates(chain: identity.chain, privateKey: identity.privateKey, caCertificatePEM: identity.caCertificatePEM)
    }
}
