import Crypto
import Foundation
import Locking

/// The files a stack of callpush processes shares, generated fresh in a private directory: APNs
/// token keys (`.p8`) with one apps file per key (one app, `app`), dispatch's API keys file (hash
/// only) and the ack secret. Secret files are created `0600`. With `fcm`, apps file `i` also names
/// an FCM service-account file (``fcmServiceAccountFiles``), which the caller writes before a worker
/// reads it (its key is an RSA key this module does not generate).
///
/// The campaign gives every worker run its own token key, all registered with the simulator: the
/// key id in a recorded push's JWT tells which run pushed it, which is how it tells a retry by the
/// same run from a second push by another run (`Verdict.checkPushes`).
public struct StackFiles: Sendable {
    public static let teamID = "CAMPTEAM01"
    public static func keyID(_ index: Int) -> String { "CAMPKEY" + String(format: "%03d", index) }

    /// The one app of the apps files (and of the API key's tenant).
    public let app: String
    public let bundleID: String
    public let directory: String
    /// Token key files, one per worker run.
    public let keyFiles: [String]
    /// Where the simulator writes its CA (`--write-ca`).
    public let caFile: String
    /// Apps files, `appsFiles[i]` naming key `i` (and service account `i` with `fcm`).
    public let appsFiles: [String]
    /// FCM service-account files named by the apps files (empty without `fcm`); not written here.
    public let fcmServiceAccountFiles: [String]
    public let apiKeysFile: String
    public let ackSecretFile: String
    /// The plaintext API key the load generator presents to dispatch.
    public let apiKey: String

    public init(directory: String, keys: Int, app: String, bundleID: String, fcm: Bool = false) throws {
        self.app = app
        self.bundleID = bundleID
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        keyFiles = (0..<keys).map { directory + "/AuthKey_\(Self.keyID($0)).p8" }
        caFile = directory + "/apns-ca.pem"
        appsFiles = (0..<keys).map { directory + "/apps-\($0).json" }
        fcmServiceAccountFiles = fcm ? (0..<keys).map { directory + "/fcm-service-account-\($0).json" } : []
        apiKeysFile = directory + "/api-keys.json"
        ackSecretFile = directory + "/ack-secret"
        apiKey = "cp_campaign_" + Self.randomHex(24)

        try Self.writeSecret(Self.randomHex(32), to: ackSecretFile)
        for index in 0..<keys {
            try Self.writeSecret(P256.Signing.PrivateKey().pemRepresentation, to: keyFiles[index])
            var entry: [String: Any] = ["bundleId": bundleID, "auth": "token",
                                        "keyFile": keyFiles[index], "keyId": Self.keyID(index), "teamId": Self.teamID]
            if fcm { entry["fcm"] = ["serviceAccountFile": fcmServiceAccountFiles[index]] }
            let apps: [String: Any] = [app: entry]
            try Self.writeSecret(String(decoding: try JSONSerialization.data(withJSONObject: apps), as: UTF8.self), to: appsFiles[index])
        }
        let hash = Hex.encode(Array(SHA256.hash(data: Array(apiKey.utf8))))
        let keys: [String: Any] = ["tenants": [[
            "name": "campaign", "apps": [app],
            "keys": [["name": "campaign", "sha256": hash, "ratePerSecond": 10_000, "burst": 20_000]],
        ]]]
        try Self.writeSecret(String(decoding: try JSONSerialization.data(withJSONObject: keys), as: UTF8.self), to: apiKeysFile)
    }

    /// The simulator's `--token-key` arguments, one per key.
    public var tokenKeyArguments: [String] {
        keyFiles.indices.flatMap { ["--token-key", "\(Self.teamID):\(Self.keyID($0)):\(keyFiles[$0])"] }
    }

    public static func randomHex(_ bytes: Int) -> String {
        Hex.random(bytes: bytes)
    }

    /// Writes `text` to a new file only its owner can read (`0600`).
    public static func writeSecret(_ text: String, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw StackError("cannot write \(path)")
        }
    }
}
