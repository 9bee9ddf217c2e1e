import Crypto
import Foundation

/// The files a campaign's processes share, generated fresh in a private directory: APNs token
/// keys (`.p8`) with one apps file per key, dispatch's API keys file (hash only) and the ack
/// secret. Secret files are created `0600`.
///
/// Every worker run gets its own token key, all registered with the simulator: the key id in a
/// recorded push's JWT tells which run pushed it, which is how the campaign tells a retry by the
/// same run from a second push by another run (`Verdict.checkPushes`).
struct CampaignFiles: Sendable {
    static let app = "campaign"
    static let teamID = "CAMPTEAM01"
    static func keyID(_ index: Int) -> String { "CAMPKEY" + String(format: "%03d", index) }

    let directory: String
    /// Token key files, one per worker run.
    let keyFiles: [String]
    let caFile: String
    /// Apps files, `appsFiles[i]` naming key `i`.
    let appsFiles: [String]
    let apiKeysFile: String
    let ackSecretFile: String
    /// The plaintext API key the load generator presents to dispatch.
    let apiKey: String

    init(directory: String, keys: Int) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        keyFiles = (0..<keys).map { directory + "/AuthKey_\(Self.keyID($0)).p8" }
        caFile = directory + "/apns-ca.pem"
        appsFiles = (0..<keys).map { directory + "/apps-\($0).json" }
        apiKeysFile = directory + "/api-keys.json"
        ackSecretFile = directory + "/ack-secret"
        apiKey = "cp_campaign_" + Self.randomHex(24)

        try Self.writeSecret(Self.randomHex(32), to: ackSecretFile)
        for index in 0..<keys {
            try Self.writeSecret(P256.Signing.PrivateKey().pemRepresentation, to: keyFiles[index])
            let apps: [String: [String: String]] = [
                Self.app: ["bundleId": "com.example.campaign", "auth": "token",
                           "keyFile": keyFiles[index], "keyId": Self.keyID(index), "teamId": Self.teamID],
            ]
            try Self.writeSecret(String(decoding: try JSONSerialization.data(withJSONObject: apps), as: UTF8.self), to: appsFiles[index])
        }
        let hash = SHA256.hash(data: Array(apiKey.utf8)).map { String(format: "%02x", $0) }.joined()
        let keys: [String: Any] = ["tenants": [[
            "name": "campaign", "apps": [Self.app],
            "keys": [["name": "campaign", "sha256": hash, "ratePerSecond": 10_000, "burst": 20_000]],
        ]]]
        try Self.writeSecret(String(decoding: try JSONSerialization.data(withJSONObject: keys), as: UTF8.self), to: apiKeysFile)
    }

    /// The simulator's `--token-key` arguments, one per key.
    var tokenKeyArguments: [String] {
        keyFiles.indices.flatMap { ["--token-key", "\(Self.teamID):\(Self.keyID($0)):\(keyFiles[$0])"] }
    }

    static func randomHex(_ bytes: Int) -> String {
        (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    private static func writeSecret(_ text: String, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CampaignError("cannot write \(path)")
        }
    }
}
