import Crypto
import Foundation
import SimulatorSupport

/// Configuration of an ``APNSSimulator``. Every property has a documented default.
public struct APNSSimulatorConfiguration: SimulatorListenerConfiguration, Sendable {
    /// How the simulator gets its TLS identity (shared with the FCM simulator).
    public typealias TLS = SimulatorTLS

    /// A JWT signing key the simulator accepts (the public half of a `.p8` key).
    public struct TokenKey: Sendable {
        /// The 10-character team ID expected in the `iss` claim.
        public var teamID: String
        /// The 10-character key ID expected in the `kid` header.
        public var keyID: String
        /// The public key (X9.63 bytes). Stored as bytes because swift-crypto keys are not `Sendable` on Linux.
        public var publicKeyX963: Data

        /// The public key that verifies the ES256 signature.
        public var publicKey: P256.Signing.PublicKey {
            get throws { try P256.Signing.PublicKey(x963Representation: publicKeyX963) }
        }

        /// Creates a token key from its public key.
        public init(teamID: String, keyID: String, publicKey: P256.Signing.PublicKey) {
            self.teamID = teamID
            self.keyID = keyID
            self.publicKeyX963 = publicKey.x963Representation
        }

        /// Creates a token key from PEM text: either a `.p8` private key (`BEGIN PRIVATE KEY`) or a public key
        /// (`BEGIN PUBLIC KEY`).
        public init(teamID: String, keyID: String, pem: String) throws {
            let publicKey: P256.Signing.PublicKey
            if pem.contains("PRIVATE KEY") {
                publicKey = try P256.Signing.PrivateKey(pemRepresentation: pem).publicKey
            } else {
                publicKey = try P256.Signing.PublicKey(pemRepresentation: pem)
            }
            self.init(teamID: teamID, keyID: keyID, publicKey: publicKey)
        }
    }

    /// The interface to bind. Default `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// The HTTP/2 port. `0` (default) picks a free port; read it back from ``APNsSimulator/port``.
    public var port: Int = 0
    /// The admin HTTP/1.1 port. `nil` disables the admin API; `0` (default) picks a free port.
    public var adminPort: Int? = 0
    /// The TLS identity. Default: generate one.
    public var tls: TLS = .generateSelfSigned
    /// The imitated environment. Default `.sandbox` (adds `apns-unique-id` to 200 responses).
    public var environment: APNSEnvironment = .sandbox
    /// Accepted JWT signing keys. Default: none (every bearer token is then `InvalidProviderToken`).
    public var tokenKeys: [TokenKey] = []
    /// Accept requests without an `authorization` header, as if the connection used certificate auth.
    /// Default `false`.
    public var allowUnauthenticated: Bool = false
    /// PEM of the CA(s) that sign client certificates. When set, clients may authenticate with a TLS client
    /// certificate instead of a JWT (certificate auth). Default `nil` (no client certificates asked for).
    public var trustedClientCAPEM: String? = nil
    /// Refuse TLS connections that present no client certificate (needs ``trustedClientCAPEM``). Default `false`.
    public var requireClientCertificate: Bool = false
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` announced on every connection. Default 1000 (what APNs announces).
    /// ``APNSSimulatorFaults/maxConcurrentStreams`` overrides it at run time.
    public var maxConcurrentStreams: Int = 1000
    /// Like APNs with token auth: announce 1 concurrent stream on a new connection and raise it to
    /// ``maxConcurrentStreams`` after the first successfully authenticated request. Default `false`.
    public var rampUpConcurrentStreams: Bool = false
    /// The faults active from the start. Default: none.
    public var faults: APNSSimulatorFaults = .init()
    /// How many accepted pushes are kept; older ones are dropped (and counted in the stats). Default 100,000.
    public var maxRecordedPushes: Int = 100_000
    /// The time source for JWT age checks and timestamps. Default: the system clock.
    public var clock: APNSSimulatorClock = .system

    /// Creates a configuration with the documented defaults.
    public init() {}
}

/// The wall-clock time source of the simulator (JWT `iat` checks, `410` timestamps, record times).
public typealias APNSSimulatorClock = SimulatorClock
