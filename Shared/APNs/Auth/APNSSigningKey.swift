import Crypto
import Foundation
import PushClientSupport

/// A `.p8` token-auth key: the P-256 private key with its key id and team id.
///
/// Never logged; ``description`` shows only the ids.
public struct APNSSigningKey: Sendable, CustomStringConvertible {
    /// The 10-character key id from Apple's developer portal (JWT header `kid`).
    public let keyID: String
    /// The team id (JWT claim `iss`).
    public let teamID: String
    /// The raw 32-byte scalar (swift-crypto's key type is not `Sendable` on every platform; this is).
    private let rawKey: Data

    /// Creates a key from the contents of a `.p8` file (PKCS#8 PEM).
    public init(p8PEM: String, keyID: String, teamID: String) throws(APNSCredentialError) {
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: p8PEM)
        } catch {
            throw APNSCredentialError(.invalidKey, "the .p8 key is not a P-256 PKCS#8 PEM key")
        }
        try self.init(privateKey: key, keyID: keyID, teamID: teamID)
    }

    /// Reads a `.p8` file.
    public init(p8File path: String, keyID: String, teamID: String) throws(APNSCredentialError) {
        let pem: String
        do {
            pem = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw APNSCredentialError(.unreadableFile, "cannot read .p8 file at \(path)")
        }
        try self.init(p8PEM: pem, keyID: keyID, teamID: teamID)
    }

    /// Wraps an existing key (tests, keys from a secret store).
    public init(privateKey: P256.Signing.PrivateKey, keyID: String, teamID: String) throws(APNSCredentialError) {
        guard Self.isIdentifier(keyID) else {
            throw APNSCredentialError(.invalidIdentifier, "key id must be non-empty ASCII letters/digits")
        }
        guard Self.isIdentifier(teamID) else {
            throw APNSCredentialError(.invalidIdentifier, "team id must be non-empty ASCII letters/digits")
        }
        self.rawKey = privateKey.rawRepresentation
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Signs `data` with ES256 (ECDSA P-256 / SHA-256).
    func signature(for data: Data) throws -> P256.Signing.ECDSASignature {
        try P256.Signing.PrivateKey(rawRepresentation: rawKey).signature(for: data)
    }

    private static func isIdentifier(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 64
            && value.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) }
    }

    public var description: String { "APNSSigningKey(team: \(teamID), key: \(keyID))" }
}

/// A credential that cannot be loaded or used. Always fatal: fix the configuration.
public typealias APNSCredentialError = CredentialError<APNSCredentialErrorCode>

/// Stable failure codes of ``APNSCredentialError``.
public enum APNSCredentialErrorCode: String, Sendable, Hashable {
    case invalidKey = "invalid-key"
    case invalidIdentifier = "invalid-identifier"
    case unreadableFile = "unreadable-file"
    case invalidCertificate = "invalid-certificate"
    case invalidTrustRoot = "invalid-trust-root"
    case invalidConfiguration = "invalid-configuration"
}
