import Foundation
import Logging
import NIOCore
import NIOPosix

extension FCMClientConfiguration {
    /// Settings for an FCM simulator on this machine (tests, benchmarks, `callpush dev`): the endpoint is
    /// `https://host:port`, and only the simulator's CA is trusted — certificate verification stays on.
    /// The service account (from the simulator) carries its token URI. Adjust the returned value as needed.
    public static func localSimulator(port: Int, caCertificatePEM: String, host: String = "127.0.0.1") -> FCMClientConfiguration {
        var configuration = FCMClientConfiguration()
        configuration.endpoint = "https://\(host.contains(":") ? "[\(host)]" : host):\(port)"
        configuration.additionalTrustedCAPEM = [caCertificatePEM]
        configuration.trustOnlyAdditionalCAs = true
        return configuration
    }
}

extension FCMClient {
    /// A client for an FCM simulator on this machine: ``FCMClientConfiguration/localSimulator(port:caCertificatePEM:host:)``
    /// adjusted by `configure`, with the given apps (service accounts written by the simulator).
    ///
    /// ```swift
    /// let client = try FCMClient.localSimulator(
    ///     port: simulator.port, caCertificatePEM: simulator.caCertificatePEM,
    ///     apps: ["rider": FCMApp(serviceAccount: try FCMServiceAccount(json: Array(simulator.serviceAccountJSON().utf8)))])
    /// ```
    public static func localSimulator(
        port: Int,
        caCertificatePEM: String,
        host: String = "127.0.0.1",
        apps: [FCMAppID: FCMApp],
        configure: (inout FCMClientConfiguration) -> Void = { _ in },
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "callpush.fcm")
    ) throws(FCMCredentialError) -> FCMClient {
        var configuration = FCMClientConfiguration.localSimulator(port: port, caCertificatePEM: caCertificatePEM, host: host)
        configure(&configuration)
        return try FCMClient(configuration: configuration, apps: apps, eventLoopGroup: eventLoopGroup, logger: logger)
    }
}
