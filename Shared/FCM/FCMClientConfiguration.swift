import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL
import PushClientSupport

/// Settings of an ``FCMClient``. Defaults suit Google's production service.
public struct FCMClientConfiguration: Sendable {
    /// Where `POST /v1/projects/{project}/messages:send` goes. Default `https://fcm.googleapis.com`.
    public var endpoint: String = "https://fcm.googleapis.com"
    /// HTTP/2 connections to the endpoint (each one multiplexes up to the server's stream limit; FCM allows
    /// 100 per connection). Requests go to the least-loaded one. Default 2.
    public var connections: Int = 2
    /// HTTP/1.1 connections per connection slot when a server does not offer HTTP/2 (ALPN). Default 8.
    public var http1ConnectionsPerSlot: Int = 8
    /// Sends in flight (including those waiting for a stream or a token) before new ones fail at once with
    /// `queue-full`. Default 10,000.
    public var maxPendingRequests: Int = 10_000
    /// Default deadline of one send (token, connection and answer included); a message's deadline shortens it.
    /// Default 5 s.
    public var requestTimeout: Duration = .seconds(5)
    /// TCP + TLS connect timeout. Default 10 s (the request's deadline still bounds the send).
    public var connectTimeout: Duration = .seconds(10)
    /// Bound of one token request; senders waiting for it still give up at their own deadline. Default 10 s.
    public var tokenRequestTimeout: Duration = .seconds(10)
    /// A 401 on a token minted by an earlier 401 less than this ago is reported as refused credentials instead
    /// of renewing again (no renewal loop against a server that refuses every token). Default 30 s.
    public var minimumForcedTokenRenewalInterval: Duration = .seconds(30)
    /// First fail-fast window after a failed token request; doubles per consecutive failure. Default 1 s.
    public var tokenFailureBackoff: Duration = .seconds(1)
    /// Cap of the fail-fast window. Default 30 s.
    public var tokenFailureMaximumBackoff: Duration = .seconds(30)
    /// Idle connections are closed after this. Default 60 s.
    public var idleTimeout: Duration = .seconds(60)
    /// Graceful shutdown waits at most this long for sends in flight. Default 10 s.
    public var shutdownDrainTimeout: Duration = .seconds(10)
    /// Extra CA certificates (PEM) trusted in addition to the system roots (the FCM simulator's CA).
    /// Verification is always on.
    public var additionalTrustedCAPEM: [String] = []
    /// Use only ``additionalTrustedCAPEM`` as trust roots. Default `false`.
    public var trustOnlyAdditionalCAs: Bool = false

    public init() {}

    /// Checks the settings, naming the first bad one.
    public func validate() throws(FCMCredentialError) {
        func check(_ ok: Bool, _ key: String) throws(FCMCredentialError) {
            if !ok { throw FCMCredentialError(.invalidConfiguration, "invalid FCM client setting: \(key)") }
        }
        let url = URL(string: endpoint)
        try check(url?.scheme == "https" && url?.host != nil && (url?.path ?? "").isEmpty, "endpoint (https://host[:port], no path)")
        try check((1...64).contains(connections), "connections (1...64)")
        try check((1...64).contains(http1ConnectionsPerSlot), "http1ConnectionsPerSlot (1...64)")
        try check(maxPendingRequests >= 1, "maxPendingRequests (>= 1)")
        try check(requestTimeout > .zero, "requestTimeout (> 0)")
        try check(connectTimeout > .zero, "connectTimeout (> 0)")
        try check(tokenRequestTimeout > .zero, "tokenRequestTimeout (> 0)")
        try check(minimumForcedTokenRenewalInterval >= .zero, "minimumForcedTokenRenewalInterval (>= 0)")
        try check(tokenFailureBackoff >= .zero && tokenFailureMaximumBackoff >= tokenFailureBackoff, "tokenFailureBackoff / tokenFailureMaximumBackoff")
        try check(idleTimeout > .zero, "idleTimeout (> 0)")
        try check(!trustOnlyAdditionalCAs || !additionalTrustedCAPEM.isEmpty, "trustOnlyAdditionalCAs needs additionalTrustedCAPEM")
    }

    /// The AsyncHTTPClient settings of one connection slot: HTTP/2 by ALPN (HTTP/1.1 otherwise), TLS 1.2+ with
    /// full verification, no redirects, no decompression, bounded connections.
    func makeHTTPConfiguration() throws(FCMCredentialError) -> HTTPClient.Configuration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.certificateVerification = .fullVerification
        do {
            try tls.trust(caPEMs: additionalTrustedCAPEM, only: trustOnlyAdditionalCAs)
        } catch {
            throw FCMCredentialError(.invalidTrustRoot, "additionalTrustedCAPEM holds an unreadable PEM certificate")
        }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(connect: TimeAmount(connectTimeout)),
            decompression: .disabled)
        configuration.httpVersion = .automatic
        configuration.connectionPool = .init(
            idleTimeout: TimeAmount(idleTimeout), concurrentHTTP1ConnectionsPerHostSoftLimit: http1ConnectionsPerSlot)
        return configuration
    }

    /// The send URL of a project.
    func sendURL(project: String) -> String {
        endpoint + "/v1/projects/" + project + "/messages:send"
    }
}
