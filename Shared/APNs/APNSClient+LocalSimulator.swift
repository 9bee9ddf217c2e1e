import PushClientSupport

extension APNSClientConfiguration: PushClientSettings {
    /// Both environments go to `host:port` (a simulator's; see `localSimulator(port:caCertificatePEM:host:)`).
    public mutating func useEndpoint(host: String, port: Int) {
        let endpoint = APNSEndpoint(host: host, port: port)
        productionEndpoint = endpoint
        sandboxEndpoint = endpoint
    }
}

extension APNSClient: PushClient {
    public typealias Settings = APNSClientConfiguration
    public typealias App = APNSApp
    public typealias SetupError = APNSCredentialError
    public static let defaultLoggerLabel = "callpush.apns"
}
