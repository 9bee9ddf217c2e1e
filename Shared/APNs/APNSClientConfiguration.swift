import NIOSSL
import PushClientSupport

/// Settings of an ``APNSClient``. Defaults suit Apple's production service.
public struct APNSClientConfiguration: Sendable {
    /// Endpoint for production device tokens (default `api.push.apple.com:443`).
    public var productionEndpoint: APNSEndpoint = .production
    /// Endpoint for sandbox device tokens (default `api.sandbox.push.apple.com:443`).
    public var sandboxEndpoint: APNSEndpoint = .sandbox
    /// Connections per (environment, credential). Load is spread over them. Default 2.
    public var connectionsPerPool: Int = 2
    /// Upper bound on streams per connection even if the server allows more. Default 1000.
    public var maxStreamsPerConnection: Int = 1000
    /// The first HTTP/2 stream id of each connection (tests start near the end of the 2^31 id space to see a
    /// connection retire itself when it runs out of ids).
    var firstStreamID: UInt32 = 1
    /// Requests that may wait for a free stream per pool before new ones fail with `queue-full`. Default 10,000.
    public var maxQueuedRequestsPerPool: Int = 10_000
    /// Default deadline of one push, queueing and transparent retries included. Default 5 s.
    public var requestTimeout: Duration = .seconds(5)
    /// TCP + TLS + HTTP/2 settings exchange. Default 10 s.
    public var connectTimeout: Duration = .seconds(10)
    /// A connection without traffic for this long gets a PING. Default 60 s.
    public var pingInterval: Duration = .seconds(60)
    /// A PING not answered within this closes the connection (it is replaced). Default 10 s.
    public var pingTimeout: Duration = .seconds(10)
    /// With requests waiting on a connection, nothing read from it for this long makes it send a PING; if
    /// nothing at all is read within this long again, the connection is taken for dead: it is closed (its
    /// requests end `connection-lost`) and replaced. A silent connection is noticed within about 2.5× this
    /// instead of at the idle PING. Default 2 s.
    public var inFlightReadTimeout: Duration = .seconds(2)
    /// First reconnect delay after a failed connect (full jitter). Default 100 ms.
    public var reconnectInitialBackoff: Duration = .milliseconds(100)
    /// Cap of the reconnect delay. Default 30 s.
    public var reconnectMaximumBackoff: Duration = .seconds(30)
    /// Graceful shutdown waits at most this long for in-flight pushes. Default 10 s.
    public var shutdownDrainTimeout: Duration = .seconds(10)
    /// Extra CA certificates (PEM) trusted in addition to the system roots — e.g. the APNs simulator's CA.
    /// Verification is always on.
    public var additionalTrustedCAPEM: [String] = []
    /// Use only ``additionalTrustedCAPEM`` as trust roots (not the system store). Default `false`.
    public var trustOnlyAdditionalCAs: Bool = false
    /// Token renewal age (clamped to 20–55 min). Default 50 min.
    public var tokenRenewAfter: Duration = .seconds(50 * 60)

    public init() {}

    /// The endpoint for an environment.
    public func endpoint(for environment: APNSEnvironment) -> APNSEndpoint {
        switch environment {
        case .production: productionEndpoint
        case .sandbox: sandboxEndpoint
        }
    }

    /// Checks the settings, naming the first bad one.
    public func validate() throws(APNSCredentialError) {
        func check(_ ok: Bool, _ key: String) throws(APNSCredentialError) {
            if !ok { throw APNSCredentialError(.invalidConfiguration, "invalid APNs client setting: \(key)") }
        }
        try check(connectionsPerPool >= 1 && connectionsPerPool <= 64, "connectionsPerPool (1...64)")
        try check(maxStreamsPerConnection >= 1, "maxStreamsPerConnection (>= 1)")
        try check(maxQueuedRequestsPerPool >= 0, "maxQueuedRequestsPerPool (>= 0)")
        try check(requestTimeout > .zero, "requestTimeout (> 0)")
        try check(connectTimeout > .zero, "connectTimeout (> 0)")
        try check(pingInterval > .zero && pingTimeout > .zero, "pingInterval / pingTimeout (> 0)")
        try check(inFlightReadTimeout > .zero, "inFlightReadTimeout (> 0)")
        try check(reconnectInitialBackoff > .zero && reconnectMaximumBackoff >= reconnectInitialBackoff, "reconnect backoff")
        try check(productionEndpoint.hasValidHost, "productionEndpoint.host (a host name or IP literal)")
        try check(sandboxEndpoint.hasValidHost, "sandboxEndpoint.host (a host name or IP literal)")
        try check(productionEndpoint.port > 0 && productionEndpoint.port < 65536, "productionEndpoint.port")
        try check(sandboxEndpoint.port > 0 && sandboxEndpoint.port < 65536, "sandboxEndpoint.port")
        try check(!trustOnlyAdditionalCAs || !additionalTrustedCAPEM.isEmpty, "trustOnlyAdditionalCAs needs additionalTrustedCAPEM")
    }

    /// The TLS configuration for one credential: TLS 1.2+, ALPN h2, full verification.
    func makeTLSConfiguration(clientCertificate: APNSClientCertificate?) throws(APNSCredentialError) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        tls.certificateVerification = .fullVerification
        do {
            try tls.trust(caPEMs: additionalTrustedCAPEM, only: trustOnlyAdditionalCAs)
        } catch {
            throw APNSCredentialError(.invalidTrustRoot, "additionalTrustedCAPEM holds an unreadable PEM certificate")
        }
        if let clientCertificate {
            tls.certificateChain = clientCertificate.certificateChain.map { .certificate($0) }
            tls.privateKey = .privateKey(clientCertificate.privateKey)
        }
        return tls
    }
}
