import FCM
import FCMSimulator
import Foundation
import Logging
import Testing

/// Runs an FCM simulator and a client for it around a test body, and cleans both up.
enum FCMTestFixture {
    /// One generated service account for the whole run (2048-bit RSA key generation is slow in debug builds).
    static let account: FCMSimulatorServiceAccount = {
        do { return try FCMSimulatorServiceAccount.generate(projectID: "callpush-test") } catch { fatalError("RSA key generation failed: \(error)") }
    }()

    static let token = "dGVzdC10b2tlbg:APA91bF0x9Kc3zqT7mWvYp2LrN8sHdE4uJ6gBaQ1oIcVtXyZ-_abcdefghijklmnopqrstuvwxyz0123456789"
    static let app: FCMAppID = "rider"

    static var logger: Logger {
        var logger = Logger(label: "fcm-test")
        logger.logLevel = .warning
        return logger
    }

    static func withClient<T>(
        faults: FCMSimulatorFaults = .init(),
        simulator configureSimulator: (inout FCMSimulatorConfiguration) -> Void = { _ in },
        client configureClient: (inout FCMClientConfiguration) -> Void = { _ in },
        _ body: (FCMSimulator, FCMClient) async throws -> T
    ) async throws -> T {
        var configuration = FCMSimulatorConfiguration()
        configuration.serviceAccounts = [account]
        configuration.faults = faults
        configureSimulator(&configuration)
        let simulator = try FCMSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        let serviceAccount = try FCMServiceAccount(json: Array(try simulator.serviceAccountJSON().utf8))
        let client: FCMClient
        do {
            client = try FCMClient.localSimulator(
                port: simulator.port, caCertificatePEM: simulator.caCertificatePEM,
                apps: [app: FCMApp(serviceAccount: serviceAccount)],
                configure: { $0.tokenFailureBackoff = .milliseconds(100); configureClient(&$0) }, logger: logger)
        } catch {
            await simulator.stop()
            throw error
        }
        do {
            let result = try await body(simulator, client)
            await client.shutdown()
            await simulator.stop()
            return result
        } catch {
            await client.shutdown()
            await simulator.stop()
            throw error
        }
    }

    /// A ring message: the call fields and an ack token, deadline `seconds` from now.
    static func message(token: String = token, callID: String = "call-\(UUID().uuidString.lowercased())", seconds: Double = 30,
                        data: [String: String]? = nil) -> FCMMessage {
        FCMMessage(
            app: app, token: token,
            data: data ?? ["callId": callID, "handle": "driver-1234", "displayName": "Your driver", "ackToken": "v1.abc.def"],
            collapseKey: callID, deadline: Date().addingTimeInterval(seconds))
    }
}
