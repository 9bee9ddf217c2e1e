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

    /// The `:authority` header value.
    var authority: String { port == 443 ? host : "\(host):\(port)" }

    public var description: String { "\(host):\(port)" }
}
