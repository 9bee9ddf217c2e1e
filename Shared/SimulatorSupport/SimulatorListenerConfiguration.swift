import Foundation

/// How a simulator gets its TLS identity.
public enum SimulatorTLS: Sendable {
    /// Generate a fresh CA and a server certificate signed by it (SANs `localhost`, `127.0.0.1`, `::1`).
    /// Clients must trust the simulator's `caCertificatePEM`.
    case generateSelfSigned
    /// Use a PEM certificate chain (leaf first) and a PEM private key from files; the simulator's
    /// `caCertificatePEM` is then the last certificate of the chain.
    case files(certificateChainPEMPath: String, privateKeyPEMPath: String)
}

/// Where a simulator listens: what the APNs and FCM simulators' configurations have alike, so the
/// programs set it from their shared command-line options in one place.
public protocol SimulatorListenerConfiguration {
    /// The interface to bind.
    var host: String { get set }
    /// The protocol port (`0` picks a free one).
    var port: Int { get set }
    /// The admin HTTP/1.1 port; `nil` disables the admin API.
    var adminPort: Int? { get set }
    /// The TLS identity.
    var tls: SimulatorTLS { get set }
}

/// The wall-clock time source of a simulator (JWT checks, token expiry, record times).
public struct SimulatorClock: Sendable {
    /// Returns the current time.
    public var now: @Sendable () -> Date

    /// Creates a clock from a closure returning the current time.
    public init(now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    /// The system clock.
    public static let system = SimulatorClock(now: { Date() })
}

extension SimulatorTLSIdentity {
    /// The identity `tls` asks for; a generated CA is named `caCommonName`.
    /// - Throws: ``SimulatorError`` `invalidConfiguration` saying what failed.
    public static func make(_ tls: SimulatorTLS, caCommonName: String) throws(SimulatorError) -> SimulatorTLSIdentity {
        do {
            switch tls {
            case .generateSelfSigned:
                return try .generated(caCommonName: caCommonName)
            case .files(let chainPath, let keyPath):
                return try .files(chainPath: chainPath, keyPath: keyPath)
            }
        } catch {
            throw SimulatorError.invalidConfiguration(error.message)
        }
    }
}
