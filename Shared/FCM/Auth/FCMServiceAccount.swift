import Foundation
import PushClientSupport
import _CryptoExtras

/// A Google service account as in the JSON file the Firebase console gives out: the project, the client email,
/// the RSA private key (and its id) that signs the OAuth2 JWT grant, and the token URI.
///
/// Read from a file; the key is never logged (``description`` shows the email and project only).
public struct FCMServiceAccount: Sendable, CustomStringConvertible {
    /// `project_id`: the Firebase project messages are sent for.
    public let projectID: String
    /// `client_email`: the JWT's `iss`.
    public let clientEmail: String
    /// `private_key_id`: the JWT header's `kid` (omitted when the file has none).
    public let privateKeyID: String?
    /// `token_uri`: where the JWT grant is exchanged for an access token (and the JWT's `aud`).
    public let tokenURI: String
    let privateKey: _RSA.Signing.PrivateKey

    /// Google's token endpoint, used when the file has no `token_uri`.
    public static let googleTokenURI = "https://oauth2.googleapis.com/token"

    private struct Wire: Decodable {
        var type: String?
        var project_id: String?
        var private_key_id: String?
        var private_key: String?
        var client_email: String?
        var token_uri: String?
    }

    /// Parses the service-account JSON.
    /// - Throws: ``FCMCredentialError`` naming the missing or bad field (never quoting the key).
    public init(json: some Collection<UInt8>) throws(FCMCredentialError) {
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(json))
        } catch {
            throw FCMCredentialError(.invalidServiceAccount, "service account is not a JSON object with string fields")
        }
        if let type = wire.type, type != "service_account" {
            throw FCMCredentialError(.invalidServiceAccount, "service account: type is '\(type.prefix(40))', expected 'service_account'")
        }
        guard let project = wire.project_id, Self.isProjectID(project) else {
            throw FCMCredentialError(.invalidServiceAccount, "service account: project_id is missing or not a project id")
        }
        guard let email = wire.client_email, email.contains("@"), email.utf8.count <= 320,
            !email.contains(where: { $0.isWhitespace })
        else {
            throw FCMCredentialError(.invalidServiceAccount, "service account: client_email is missing or not an email address")
        }
        guard let pem = wire.private_key, !pem.isEmpty else {
            throw FCMCredentialError(.invalidServiceAccount, "service account: private_key is missing")
        }
        let tokenURI = wire.token_uri ?? Self.googleTokenURI
        guard let url = URL(string: tokenURI), url.scheme == "https", url.host != nil else {
            throw FCMCredentialError(.invalidServiceAccount, "service account: token_uri must be an https URL")
        }
        let key: _RSA.Signing.PrivateKey
        do {
            key = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw FCMCredentialError(.invalidKey, "service account: private_key is not an RSA private key PEM (2048 bits or more)")
        }
        try self.init(projectID: project, clientEmail: email, privateKeyID: wire.private_key_id, tokenURI: tokenURI, privateKey: key)
    }

    /// Reads a service-account JSON file.
    public init(contentsOfFile path: String) throws(FCMCredentialError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FCMCredentialError(.unreadableFile, "cannot read the service-account file at \(path)")
        }
        guard data.count <= 64 * 1024 else {
            throw FCMCredentialError(.invalidServiceAccount, "the service-account file at \(path) is over 64 KiB")
        }
        try self.init(json: data)
    }

    /// Wraps a key from elsewhere (tests, a secret store).
    public init(
        projectID: String, clientEmail: String, privateKeyID: String?, tokenURI: String,
        privateKey: _RSA.Signing.PrivateKey
    ) throws(FCMCredentialError) {
        guard privateKey.keySizeInBits >= 2048 else {
            throw FCMCredentialError(.invalidKey, "service account: the RSA key has \(privateKey.keySizeInBits) bits, at least 2048 needed")
        }
        guard Self.isProjectID(projectID) else {
            throw FCMCredentialError(.invalidServiceAccount, "service account: project_id is not a project id")
        }
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID.flatMap { $0.isEmpty ? nil : $0 }
        self.tokenURI = tokenURI
        self.privateKey = privateKey
    }

    /// Identifies the credential: apps with the same email, key and token URI share one access token.
    var identity: String { "\(clientEmail)|\(privateKeyID ?? "-")|\(tokenURI)" }

    /// Google project ids: lowercase letters, digits and hyphens, optionally `domain:` scoped.
    static func isProjectID(_ value: String) -> Bool {
        let utf8 = value.utf8
        guard !utf8.isEmpty, utf8.count <= 100 else { return false }
        return utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x2E || $0 == 0x3A }
    }

    public var description: String { "FCMServiceAccount(\(clientEmail), project: \(projectID))" }
}

/// A service account or client setting that cannot be used. Always fatal: fix the configuration.
public typealias FCMCredentialError = CredentialError<FCMCredentialErrorCode>

/// Stable failure codes of ``FCMCredentialError``.
public enum FCMCredentialErrorCode: String, Sendable, Hashable {
    case invalidServiceAccount = "invalid-service-account"
    case invalidKey = "invalid-key"
    case unreadableFile = "unreadable-file"
    case invalidTrustRoot = "invalid-trust-root"
    case invalidConfiguration = "invalid-configuration"
}
