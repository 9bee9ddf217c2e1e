import Foundation
import Logging
import NIOCore
import NIOPosix

/// The settings of a push client (`APNSClientConfiguration`, `FCMClientConfiguration`) as far as
/// a simulator on this machine needs them: where requests go and which CAs are trusted.
public protocol PushClientSettings: Sendable {
    /// The defaults (the push service's production settings).
    init()
    /// Extra CA certificates (PEM) trusted in addition to the system roots, e.g. a simulator's CA.
    var additionalTrustedCAPEM: [String] { get set }
    /// Use only ``additionalTrustedCAPEM`` as trust roots (not the system store).
    var trustOnlyAdditionalCAs: Bool { get set }
    /// Sends every request to `host:port`.
    mutating func useEndpoint(host: String, port: Int)
}

extension PushClientSettings {
    /// Settings for a simulator on this machine (tests, benchmarks, `callpush dev`): every request
    /// goes to `host:port`, and only the simulator's CA is trusted — certificate verification stays
    /// on. Everything else keeps its default; adjust the returned value as needed.
    ///
    /// - Parameters:
    ///   - port: the simulator's HTTPS port.
    ///   - caCertificatePEM: the CA to trust (the simulator's `caCertificatePEM`).
    ///   - host: `127.0.0.1` by default (the simulators' certificates also name `localhost` and `::1`).
    public static func localSimulator(port: Int, caCertificatePEM: String, host: String = "127.0.0.1") -> Self {
        var configuration = Self()
        configuration.useEndpoint(host: host, port: port)
        configuration.additionalTrustedCAPEM = [caCertificatePEM]
        configuration.trustOnlyAdditionalCAs = true
        return configuration
    }
}

/// A push client (`APNSClient`, `FCMClient`) as made from its settings and apps.
public protocol PushClient: AnyObject, Sendable {
    associatedtype Settings: PushClientSettings
    /// What the client needs to know of one app (its credentials).
    associatedtype App: Sendable
    /// The client's credential error, thrown for a bad setting or credential.
    associatedtype SetupError: Error
    /// The logger label the client uses unless given a logger.
    static var defaultLoggerLabel: String { get }

    /// Creates a client; `now` is the wall clock its credentials are dated by.
    init(configuration: Settings, apps: [AppID<Self>: App], eventLoopGroup: any EventLoopGroup, logger: Logger,
         now: @escaping @Sendable () -> Date) throws(SetupError)
}

extension PushClient {
    /// A client for a simulator on this machine: ``PushClientSettings/localSimulator(port:caCertificatePEM:host:)``
    /// adjusted by `configure`, with the given apps.
    ///
    /// ```swift
    /// let client = try APNSClient.localSimulator(
    ///     port: simulator.port, caCertificatePEM: simulator.caCertificatePEM,
    ///     apps: ["rider": APNSApp(bundleID: "com.example.rider", credentials: .token(signingKey))],
    ///     configure: { $0.requestTimeout = .seconds(10) })
    /// ```
    /// - Throws: the client's ``SetupError`` naming the bad setting or credential.
    public static func localSimulator(
        port: Int,
        caCertificatePEM: String,
        host: String = "127.0.0.1",
        apps: [AppID<Self>: App],
        configure: (inout Settings) -> Void = { _ in },
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger? = nil
    ) throws(SetupError) -> Self {
        var configuration = Settings.localSimulator(port: port, caCertificatePEM: caCertificatePEM, host: host)
        configure(&configuration)
        return try Self(configuration: configuration, apps: apps, eventLoopGroup: eventLoopGroup,
                        logger: logger ?? Logger(label: defaultLoggerLabel), now: { Date() })
    }
}
