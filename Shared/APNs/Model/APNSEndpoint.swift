/// Where the client connects for one environment (Apple's host by default; a simulator or proxy otherwise).
public struct APNSEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// DNS name or IP literal. Looked up afresh for every new connection.
    public var host: String
    /// TCP port (APNs: 443, or 2197).
    public var port: Int

    public init(host: String, port: Int = 443) {
        self.host = host
        self.port = port
    }

    /// Apple's production endpoint.
    public static let production = APNSEndpoint(host: "api.push.apple.com")
    /// Apple's development endpoint.
    public static let sandbox = APNSEndpoint(host: "api.sandbox.push.apple.com")

    /// Whether `host` is made of host-name or IP-literal characters only (letters, digits, `.`, `-`, `_`, and
    /// `:` `[` `]` of IPv6 literals), 1–253 of them: it is sent as the `:authority` of every request.
    var hasValidHost: Bool {
        let bytes = host.utf8
        return (1...253).contains(bytes.count) && bytes.allSatisfy { byte in
            (byte | 0x20) &- UInt8(ascii: "a") < 26 || byte &- UInt8(ascii: "0") < 10
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]")
        }
    }

    /// The `:authority` header value.
    var authority: String { port == 443 ? host : "\(host):\(port)" }

    public var description: String { "\(host):\(port)" }
}
