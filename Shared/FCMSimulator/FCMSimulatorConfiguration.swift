import Foundation
import SimulatorSupport

/// Configuration of an ``FCMSimulator``. Every property has a documented default.
public struct FCMSimulatorConfiguration: SimulatorListenerConfiguration, Sendable {
    /// How the simulator gets its TLS identity (shared with the APNs simulator).
    public typealias TLS = SimulatorTLS

    /// The interface to bind. Default `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// The HTTPS port (FCM and its token endpoint; HTTP/2 and HTTP/1.1 by ALPN). `0` (default) picks a free one.
    public var port: Int = 0
    /// The admin HTTP/1.1 port. `nil` disables the admin API; `0` (default) picks a free port.
    public var adminPort: Int? = 0
    /// The TLS identity. Default: generate one.
    public var tls: TLS = .generateSelfSigned
    /// Service accounts whose JWT grants are accepted. Default: none given, so one is generated (project
    /// `callpush-simulator`); read it back from ``FCMSimulator/serviceAccounts``.
    public var serviceAccounts: [FCMSimulatorServiceAccount] = []
    /// Lifetime of the access tokens issued (`expires_in`), unless ``FCMSimulatorFaults/accessTokenLifetimeSeconds``
    /// overrides it. Default 3599 s, like Google.
    public var accessTokenLifetime: Duration = .seconds(3599)
    /// Access tokens remembered at once; the oldest are forgotten first (they then get 401). Default 100,000.
    public var maxAccessTokens: Int = 100_000
    /// The faults active from the start. Default: none.
    public var faults: FCMSimulatorFaults = .init()
    /// How many accepted messages are kept; older ones are dropped (and counted). Default 100,000.
    public var maxRecordedMessages: Int = 100_000
    /// The largest request body read (messages and token requests); larger ones are refused. Default 64 KiB.
    public var maxBodyBytes: Int = 64 * 1024
    /// Connections served at once (further ones wait in the listen backlog). Default 1,000.
    public var maxConnections: Int = 1_000
    /// The time source for JWT checks, token expiry and record times. Default: the system clock.
    public var clock: FCMSimulatorClock = .system

    /// Creates a configuration with the documented defaults.
    public init() {}
}

/// The wall-clock time source of the simulator.
public typealias FCMSimulatorClock = SimulatorClock
