import APNsSimulator
import CallpushTestSupport
import Crypto
import Foundation
import Logging
import NIOCore
import Testing

@testable import APNs

/// An in-process simulator (port 0) plus a client trusting its CA, torn down after the body.
struct SimulatorFixture: Sendable {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let bundleID = "com.example.rider"
    /// A valid-looking 32-byte hex token.
    static func deviceToken(_ n: Int) -> String { hexToken(n) }

    static let logger: Logger = {
        var logger = Logger(label: "apns-tests")
        logger.logLevel = .critical
        return logger
    }()

    let simulator: APNSSimulator
    let client: APNSClient

    /// Starts a simulator and a client for app `"rider"`, runs `body`, then stops both.
    static func run<T: Sendable>(
        simulator configure: (inout APNSSimulatorConfiguration) -> Void = { _ in },
        client configureClient: (inout APNSClientConfiguration) -> Void = { _ in },
        now: @escaping @Sendable () -> Date = { Date() },
        timeLimit seconds: Double = 50,
        _ body: (SimulatorFixture) async throws -> T
    ) async throws -> T {
        let key = P256.Signing.PrivateKey()
        var simulatorConfiguration = APNSSimulatorConfiguration()
        simulatorConfiguration.adminPort = nil
        simulatorConfiguration.tokenKeys = [.init(teamID: teamID, keyID: keyID, publicKey: key.publicKey)]
        configure(&simulatorConfiguration)
        let simulator = APNSSimulator(configuration: simulatorConfiguration, logger: logger)
        try await simulator.start()
        do {
            var configuration = APNSClientConfiguration.localSimulator(port: simulator.port, caCertificatePEM: simulator.caCertificatePEM)
            configuration.productionEndpoint = APNSEndpoint(host: "localhost", port: simulator.port)
            // Generous: tests run in parallel in debug builds on small shared machines; deadline tests set their own.
            configuration.requestTimeout = .seconds(30)
            configureClient(&configuration)
            let signingKey = try APNSSigningKey(privateKey: key, keyID: keyID, teamID: teamID)
            let client = try APNSClient(
                configuration: configuration,
                apps: ["rider": APNSApp(bundleID: bundleID, credentials: .token(signingKey))],
                logger: logger, now: now)
            let fixture = SimulatorFixture(simulator: simulator, client: client)
            do {
                let result = try await withTimeout(seconds: seconds) { try await body(fixture) }
                await client.shutdown()
                await simulator.stop()
                return result
            } catch {
                await client.shutdown()
                throw error
            }
        } catch {
            await simulator.stop()
            throw error
        }
    }

    func push(token: Int = 1, payload: String = #"{"aps":{},"callId":"c1"}"#, timeout: Duration? = nil, environment: APNSEnvironment = .sandbox) -> APNSVoIPPush {
        APNSVoIPPush(
            app: "rider", deviceToken: Self.deviceToken(token), environment: environment,
            payload: Array(payload.utf8), timeout: timeout)
    }
}
