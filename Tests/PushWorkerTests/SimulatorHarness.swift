import APNs
import APNsSimulator
import CallpushTestSupport
import Foundation
import Logging
@testable import PushWorker

/// An APNs simulator with a generated token key and an APNs client that trusts its CA.
struct SimulatorHarness {
    let simulator: APNSSimulator
    let client: APNSClient
    let key: APNSSimulatorTestKey
    var sender: APNSPushSender { APNSPushSender(client: client) }

    static func start() async throws -> SimulatorHarness {
        let key = APNSSimulatorTestKey()
        var configuration = APNSSimulatorConfiguration()
        configuration.tokenKeys = [key.tokenKey]
        configuration.adminPort = nil
        let logger = Logger(label: "simulator", factory: { _ in SwiftLogNoOpLogHandler() })
        let simulator = APNSSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        var clientConfiguration = APNSClientConfiguration.localSimulator(port: simulator.port, caCertificatePEM: simulator.caCertificatePEM)
        clientConfiguration.requestTimeout = TestTiming.scaled(.seconds(2))
        let signingKey = try APNSSigningKey(privateKey: key.privateKey, keyID: key.keyID, teamID: key.teamID)
        let client = try APNSClient(configuration: clientConfiguration,
                                    apps: ["rider": APNSApp(bundleID: "com.example.rider", credentials: .token(signingKey))],
                                    logger: logger)
        return SimulatorHarness(simulator: simulator, client: client, key: key)
    }

    func stop() async {
        await client.shutdown()
        await simulator.stop()
    }

    /// Every answer comes `milliseconds` after its request (no other fault).
    func answer(after milliseconds: Double) {
        var faults = APNSSimulatorFaults()
        faults.latency = .fixed(milliseconds: milliseconds)
        simulator.setFaults(faults)
    }

    /// Accepted pushes for `token`.
    func pushes(for token: String) -> [RecordedPush] {
        simulator.pushes().filter { $0.deviceToken == token }
    }
}
