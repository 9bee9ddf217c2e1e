import Crypto
import Foundation

/// A generated P-256 signing key with team and key IDs, for tests, benchmarks and local development: its
/// ``tokenKey`` goes into ``APNSSimulatorConfiguration/tokenKeys`` and ``providerToken(issuedAt:)`` makes JWTs
/// the simulator accepts. ``privateKeyPEM`` is the content of an equivalent `.p8` file.
public struct APNSSimulatorTestKey: Sendable {
    /// The team ID (`iss`).
    public let teamID: String
    /// The key ID (`kid`).
    public let keyID: String
    /// The private key bytes (swift-crypto keys are not `Sendable` on Linux).
    private let privateKeyRaw: Data

    /// The private key.
    public var privateKey: P256.Signing.PrivateKey {
        // The bytes come from a generated key, so they always parse.
        (try? P256.Signing.PrivateKey(rawRepresentation: privateKeyRaw)) ?? P256.Signing.PrivateKey()
    }

    /// Generates a new key.
    public init(teamID: String = "TEAM000001", keyID: String = "KEY0000001") {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKeyRaw = P256.Signing.PrivateKey().rawRepresentation
    }

    /// PKCS#8 PEM, the format of Apple's `.p8` files.
    public var privateKeyPEM: String { privateKey.pemRepresentation }

    /// The public half, for the simulator configuration.
    public var tokenKey: APNSSimulatorConfiguration.TokenKey {
        .init(teamID: teamID, keyID: keyID, publicKey: privateKey.publicKey)
    }

    /// An ES256 provider token (`kid`, `iss`, `iat`) signed with this key.
    public func providerToken(issuedAt: Date = Date()) throws -> String {
        let header = Base64URL.encode(Data(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let claims = Base64URL.encode(Data(#"{"iss":"\#(teamID)","iat":\#(Int64(issuedAt.timeIntervalSince1970))}"#.utf8))
        let input = header + "." + claims
        let signature = try privateKey.signature(for: Data(input.utf8))
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }
}
