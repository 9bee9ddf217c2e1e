import Crypto
import Foundation
import Locking

/// A backend API key as dispatch stores it: a name (for logs and metrics), the SHA-256 of the
/// key, its rate limit, the tenant it belongs to and the apps it may ring. The plaintext key is
/// never kept.
public struct APIKey: Sendable, Hashable, CustomStringConvertible {
    /// Shown in logs and metrics; not secret.
    public var name: String
    /// SHA-256 of the UTF-8 key.
    public var sha256: [UInt8]
    /// Sustained requests per second allowed for this key. Default 100.
    public var ratePerSecond: Double
    /// Burst size of the token bucket. Default 2 × rate (at least 1).
    public var burst: Double
    /// The tenant whose calls this key rings, reads and cancels (keys of one tenant share its
    /// calls, e.g. an old and a new key during a rotation). Default: the key's name.
    public var tenant: String
    /// The apps this key may ring; nil: every app of the apps file.
    public var apps: Set<String>?

    /// From a stored hash (production: the API keys file).
    public init(name: String, sha256: [UInt8], ratePerSecond: Double = 100, burst: Double? = nil,
                tenant: String? = nil, apps: Set<String>? = nil) {
        self.name = name
        self.sha256 = sha256
        self.ratePerSecond = ratePerSecond
        self.burst = burst ?? max(1, ratePerSecond * 2)
        self.tenant = tenant ?? name
        self.apps = apps
    }

    /// From a plaintext key (development: `callpush dev` generates one and prints it).
    public init(name: String, plaintext: String, ratePerSecond: Double = 100, burst: Double? = nil,
                tenant: String? = nil, apps: Set<String>? = nil) {
        self.init(name: name, sha256: Self.hash(plaintext), ratePerSecond: ratePerSecond, burst: burst, tenant: tenant, apps: apps)
    }

    /// Whether this key may ring `app`.
    public func mayRing(_ app: String) -> Bool { apps?.contains(app) ?? true }

    /// SHA-256 of a presented key.
    public static func hash(_ plaintext: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(plaintext.utf8)))
    }

    /// The hex form used in the keys file (`sha256` field).
    public static func hexHash(_ plaintext: String) -> String {
        Hex.encode(hash(plaintext))
    }

    /// A new random key (32 bytes, base64url), e.g. for `callpush dev`.
    public static func generatePlaintext() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return "cpk_" + Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    public var description: String { "APIKey(\(name), tenant \(tenant), \(ratePerSecond)/s)" }
}

/// Finds the key a request presents, comparing hashes in constant time over every stored key.
public struct APIKeyAuthenticator: Sendable {
    /// The keys requests are checked against.
    public let keys: [APIKey]

    /// Checks presented keys against `keys`.
    public init(keys: [APIKey]) { self.keys = keys }

    /// The key whose hash matches `presented`, or nil.
    public func authenticate(_ presented: String) -> APIKey? {
        let digest = APIKey.hash(presented)
        var match: APIKey?
        for key in keys where Self.constantTimeEqual(key.sha256, digest) && match == nil {
            match = key
        }
        return match
    }

    /// Compares every byte whatever the first difference (no early exit).
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
