import Crypto
import Foundation

/// The files a campaign's processes share, generated fresh in a private directory: the APNs
/// token key (`.p8`), the apps file naming it, dispatch's API keys file (hash only) and the ack
/// secret. Secret files are created `0600`.
struct CampaignFiles: Sendable {
    static let app = "campaign"
    static let teamID = "CAMPTEAM01"
    static let keyID = "CAMPKEY001"

    let directory: String
    let keyFile: String
    let caFile: String
    let appsFile: String
    let apiKeysFile: String
    let ackSecretFile: String
    /// The plaintext API key the load generator presents to dispatch.
    let apiKey: String

    init(directory: String) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        keyFile = directory + "/AuthKey_\(Self.keyID).p8"
        caFile = directory + "/apns-ca.pem"
        appsFile = directory + "/apps.json"
        apiKeysFile = directory + "/api-keys.json"
        ackSecretFile = directory + "/ack-secret"
        apiKey = "cp_campaign_" + Self.randomHex(24)

        try Self.writeSecret(P256.Signing.PrivateKey().pemRepresentation, to: keyFile)
        try Self.writeSecret(Self.randomHex(32), to: ackSecretFile)
        let apps: [String: [String: String]] = [
            Self.app: ["bundleId": "com.example.campaign", "auth": "token",
                       "keyFile": keyFile, "keyId": Self.keyID, "teamId": Self.teamID],
        ]
        try Self.writeSecret(String(decoding: try JSONSerialization.data(withJSONObject: apps), as: UTF8.self), to: appsFile)
        let hash = SHA256.hash(data: Array(apiKey.utf8)).map { String(format: "%02x", $0) }.joined()
        let keys: [[String: Any]] = [["name": "campaign", "sha256": hash, "ratePerSecond": 10_000, "burst": 20_000]]
        try Self.writeSecret(String(decoding: try JSONSerialization.data(withJSONObject: keys), as: UTF8.self), to: apiKeysFile)
    }

    /// The simulator's `--token-key` value.
    var tokenKeyArgument: String { "\(Self.teamID):\(Self.keyID):\(keyFile)" }

    static func randomHex(_ bytes: Int) -> String {
        (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    private static func writeSecret(_ text: String, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CampaignError("cannot write \(path)")
        }
    }
}
