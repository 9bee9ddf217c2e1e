import Foundation

/// Where one tenant's status webhooks go and the key they are signed with.
public struct WebhookTarget: Sendable, Hashable, CustomStringConvertible {
    /// `https://host[:port]/path[?query]` (plain `http` only to a loopback host).
    public var url: URL
    /// HMAC-SHA256 key for `X-Callpush-Signature` (at least 16 bytes).
    public var secret: [UInt8]

    public init(url: URL, secret: [UInt8]) {
        self.url = url
        self.secret = secret
    }

    /// Never the secret, nor the URL's query (receivers put tokens there).
    public var description: String {
        "WebhookTarget(\(url.scheme ?? "?")://\(url.host ?? "?")\(url.port.map { ":\($0)" } ?? "")\(url.path), secret redacted)"
    }

    /// Checks a configured URL and secret; the error names `key`.
    static func parse(url text: String, secret: String, key: String) throws(DispatchConfigurationError) -> WebhookTarget {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
              url.user == nil, url.password == nil else {
            throw DispatchConfigurationError(key, "expected https://host[:port]/path")
        }
        let loopback = ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host.lowercased())
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw DispatchConfigurationError(key, "expected https://host[:port]/path (plain http only to a loopback host)")
        }
        guard secret.utf8.count >= 16 else { throw DispatchConfigurationError(key, "the secret must be at least 16 bytes") }
        return WebhookTarget(url: url, secret: Array(secret.utf8))
    }
}
