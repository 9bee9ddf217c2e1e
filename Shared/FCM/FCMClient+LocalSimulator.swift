import PushClientSupport

extension FCMClientConfiguration: PushClientSettings {
    /// The endpoint becomes `https://host:port` (a simulator's; see `localSimulator(port:caCertificatePEM:host:)`).
    /// The service account (from the simulator) carries its token URI.
    public mutating func useEndpoint(host: String, port: Int) {
        endpoint = "https://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }
}

extension FCMClient: PushClient {
    public typealias Settings = FCMClientConfiguration
    public typealias App = FCMApp
    public typealias SetupError = FCMCredentialError
    public static let defaultLoggerLabel = "callpush.fcm"
}
