import APNsSimulator
import CallpushTestSupport
import Crypto
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Testing

@testable import APNs

extension APNSIntegration {
    @Suite struct APNSClientAppsTests {
        static func startSimulator(environment: APNSEnvironment, keys: [APNSSimulatorConfiguration.TokenKey]) async throws -> APNSSimulator {
            var configuration = APNSSimulatorConfiguration()
            configuration.adminPort = nil
            configuration.environment = environment
            configuration.tokenKeys = keys
            let simulator = APNSSimulator(configuration: configuration, logger: SimulatorFixture.logger)
            try await simulator.start()
            return simulator
        }

        @Test func severalAppsWithOwnCredentialsAreRoutedByEnvironment() async throws {
            let riderKey = P256.Signing.PrivateKey()
            let driverKey = P256.Signing.PrivateKey()
            let sandbox = try await Self.startSimulator(
                environment: .sandbox, keys: [.init(teamID: "TEAMRIDER1", keyID: "KEYRIDER01", publicKey: riderKey.publicKey)])
            let production = try await Self.startSimulator(
                environment: .production, keys: [.init(teamID: "TEAMDRIVE1", keyID: "KEYDRIVE01", publicKey: driverKey.publicKey)])
            var configuration = APNSClientConfiguration()
            configuration.sandboxEndpoint = APNSEndpoint(host: "127.0.0.1", port: sandbox.port)
            configuration.productionEndpoint = APNSEndpoint(host: "localhost", port: production.port)
            configuration.additionalTrustedCAPEM = [sandbox.caCertificatePEM, production.caCertificatePEM]
            let client = try APNSClient(
                configuration: configuration,
                apps: [
                    "rider": APNSApp(bundleID: "com.example.rider", credentials: .token(try APNSSigningKey(privateKey: riderKey, keyID: "KEYRIDER01", teamID: "TEAMRIDER1"))),
                    "driver": APNSApp(bundleID: "com.example.driver", credentials: .token(try APNSSigningKey(privateKey: driverKey, keyID: "KEYDRIVE01", teamID: "TEAMDRIVE1"))),
                ],
                logger: SimulatorFixture.logger)

            try await withTimeout(seconds: 30) {
                let token = SimulatorFixture.deviceToken(7)
                let riderSandbox = await client.send(APNSVoIPPush(app: "rider", deviceToken: token, environment: .sandbox, payload: Array("{}".utf8)))
                let driverProduction = await client.send(APNSVoIPPush(app: "driver", deviceToken: token, environment: .production, payload: Array("{}".utf8)))
                #expect(riderSandbox.isSent)
                #expect(riderSandbox.uniqueID != nil)  // only the sandbox sends apns-unique-id
                #expect(driverProduction.isSent)
                #expect(driverProduction.uniqueID == nil)
                #expect(sandbox.pushes().map { $0.headers["apns-topic"] } == ["com.example.rider.voip"])
                #expect(production.pushes().map { $0.headers["apns-topic"] } == ["com.example.driver.voip"])

                // The rider key is unknown to production: its own credentials are used, and that is a credential error.
                let riderProduction = await client.send(APNSVoIPPush(app: "rider", deviceToken: token, environment: .production, payload: Array("{}".utf8)))
                #expect(riderProduction.status == 403)
                #expect(riderProduction.disposition == .credentialsInvalid)
            }
            await client.shutdown()
            await sandbox.stop()
            await production.stop()
        }

        @Test func untrustedServerCertificateIsATLSFailureOutcome() async throws {
            let simulator = try await Self.startSimulator(environment: .sandbox, keys: [])
            var configuration = APNSClientConfiguration()
            configuration.sandboxEndpoint = APNSEndpoint(host: "127.0.0.1", port: simulator.port)
            // No simulator CA: verification (always on) must reject it.
            let key = try APNSSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: "K", teamID: "T")
            let client = try APNSClient(configuration: configuration, apps: ["a": APNSApp(bundleID: "b", credentials: .token(key))], logger: SimulatorFixture.logger)
            let outcome = try await withTimeout(seconds: 30) {
                await client.send(APNSVoIPPush(app: "a", deviceToken: "abcd", environment: .sandbox, payload: Array("{}".utf8)))
            }
            #expect(outcome.error?.code == .tlsFailure)
            #expect(outcome.disposition == .retry)
            #expect(simulator.pushes().isEmpty)
            await client.shutdown()
            await simulator.stop()
        }

        @Test func gracefulShutdownDrainsInFlightPushes() async throws {
            try await SimulatorFixture.run(simulator: { $0.faults.latency = .fixed(milliseconds: 400) }) { fixture in
                let group = ServiceGroup(
                    configuration: .init(services: [.init(service: fixture.client)], logger: SimulatorFixture.logger))
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    tasks.addTask { try await group.run() }
                    let outcomes = try await withThrowingTaskGroup(of: APNSOutcome.self) { pushes in
                        for n in 0..<20 { pushes.addTask { await fixture.client.send(fixture.push(token: n)) } }
                        // Shut down while all 20 are on the wire (recorded on arrival, answered 400 ms later).
                        try #require(try await eventually { fixture.simulator.pushes().count >= 20 }, "all 20 on the wire")
                        await group.triggerGracefulShutdown()
                        return try await pushes.reduce(into: [APNSOutcome]()) { $0.append($1) }
                    }
                    #expect(outcomes.count == 20)
                    #expect(outcomes.allSatisfy { $0.isSent })
                    try await tasks.waitForAll()
                }
                let late = await fixture.client.send(fixture.push(token: 99))
                #expect(late.error?.code == .shuttingDown)
            }
        }
    }
}
