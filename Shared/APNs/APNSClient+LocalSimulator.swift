import Foundation
import Logging
import NIOCore
import NIOPosix

extension APNSClientConfiguration {
    /// Settings for an APNs simulator on this machine (tests, benchmarks, `callpush dev`): both environments
    /// go to `host:port`, and only the simulator's CA (``additionalTrustedCAPEM``) is trusted — certificate
    /// verification stays on. Everything else keeps its default; adjust the returned value as needed.
    ///
    /// - Parameters:
    ///   - port: the simulator's HTTP/2 port (`APNSSimulator.port`).
    ///   - caCertificatePEM: the CA to trust (`APNSSimulator.caCertificatePEM`).
    ///   - host: `127.0.0.1` by default (the simulator's certificate also names `localhost` and `::1`).
    public static func localSimulator(port: Int, caCertificatePEM: String, host: String = "127.0.0.1") -> APNSClientConfiguration {
        var configuration = APNSClientConfiguration()
        let endpoint = APNSEndpoint(host: host, port: port)
        configuration.productionEndpoint = endpoint
        configuration.sandboxEndpoint = endpoint
        configuration.additionalTrustedCAPEM = [caCertificatePEM]
        configuration.trustOnlyAdditionalCAs = true
        return configuration
    }
}

extension APNSClient {
    /// A client for an APNs simulator on this machine: ``APNSClientConfiguration/localSimulator(port:caCertificatePEM:host:)``
    /// adjusted by `configure`, with the given apps.
    ///
    /// ```swift
    /// let client = try APNSClient.localSimulator(
    ///     port: simulator.port, caCertificatePEM: simulator.caCertificatePEM,
    ///     apps: ["rider": APNSApp(bundleID: "com.example.rider", credentials: .token(signingKey))],
    ///     configure: { $0.requestTimeout = .seconds(10) })
    /// ```
    /// - Throws: ``APNSCredentialError`` naming the bad setting or credential.
    public static func localSimulator(
        port: Int,
        caCertificatePEM: String,
        host: String = "127.0.0.1",
        apps: [APNSAppID: APNSApp],
        configure: (inout APNSClientConfiguration) -> Void = { _ in },
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "callpush.apns")
    ) throws(APNSCredentialError) -> APNSClient {
        var configuration = APNSClientConfiguration.localSimulator(port: port, caCertificatePEM: caCertificatePEM, host: host)
        configure(&configuration)
        return try APNSClient(configuration: configuration, apps: apps, eventLoopGroup: eventLoopGroup, logger: logger)
    }
}
