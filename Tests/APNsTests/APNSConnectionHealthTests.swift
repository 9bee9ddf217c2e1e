import APNsSimulator
import Crypto
import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import APNs

extension APNSIntegration {
    /// PING health checks and reconnect backoff against real sockets.
    @Suite struct APNSConnectionHealthTests {
        @Test func unansweredPingsCloseTheConnectionAndPushesStillComplete() async throws {
            try await SimulatorFixture.run(client: {
                $0.connectionsPerPool = 1
                $0.pingInterval = .milliseconds(300)
                $0.pingTimeout = .milliseconds(300)
            }) { fixture in
                #expect(await fixture.client.send(fixture.push(token: 1)).isSent)
                // The server hangs: it reads nothing more, so neither the next push nor the client's PING is answered.
                fixture.simulator.setFaults(.init(unresponsive: true))
                try await Task.sleep(for: .milliseconds(200))
                let stuck = await fixture.client.send(fixture.push(token: 2, timeout: .seconds(25)))
                // The unanswered PING closed the connection long before the push's own deadline.
                #expect(stuck.error?.code == .connectionLost, "\(stuck)")
                #expect(stuck.disposition == .retry)
                fixture.simulator.setFaults(.init())
                #expect(await fixture.client.send(fixture.push(token: 3)).isSent)
                #expect(fixture.simulator.stats().connectionsOpened == 2)
            }
        }

        @Test func aSilentConnectionWithAPushWaitingOnItIsNoticedWithinSecondsNotAtTheIdlePing() async throws {
            // Default health settings (idle PING after 60 s): the server stops reading and answering while a push
            // waits on the connection, like a black-holed path. The overdue answer makes the client PING; with
            // nothing read back it closes the connection well before the push's 25 s deadline.
            try await SimulatorFixture.run(client: { $0.connectionsPerPool = 1 }) { fixture in
                #expect(await fixture.client.send(fixture.push(token: 1)).isSent)
                fixture.simulator.setFaults(.init(unresponsive: true))
                try await Task.sleep(for: .milliseconds(100))
                let stuck = await fixture.client.send(fixture.push(token: 2, timeout: .seconds(25)))
                #expect(stuck.error?.code == .connectionLost, "\(stuck)")
                #expect(stuck.latency < .seconds(15), "\(stuck.latency)")
                fixture.simulator.setFaults(.init())
                #expect(await fixture.client.send(fixture.push(token: 3)).isSent)
                #expect(fixture.simulator.stats().connectionsOpened == 2)
            }
        }

        @Test func reconnectsToARefusingPortWithBackoffInsteadOfALoop() async throws {
            let port = try await Self.refusingPort()
            let key = P256.Signing.PrivateKey()
            let caOnly = APNSSimulator(configuration: APNSSimulatorConfiguration(), logger: SimulatorFixture.logger)
            let client = try APNSClient.localSimulator(
                port: port, caCertificatePEM: caOnly.caCertificatePEM,
                apps: ["rider": APNSApp(bundleID: "com.example.rider", credentials: .token(try APNSSigningKey(privateKey: key, keyID: "KEY1234567", teamID: "TEAM123456")))],
                configure: {
                    $0.connectionsPerPool = 1
                    $0.reconnectInitialBackoff = .milliseconds(50)
                    $0.reconnectMaximumBackoff = .milliseconds(400)
                },
                logger: SimulatorFixture.logger)
            var pushes = 0
            var codes: Set<String> = []
            let end = ContinuousClock.now + .seconds(2)
            while ContinuousClock.now < end {
                let outcome = await client.send(
                    APNSVoIPPush(app: "rider", deviceToken: SimulatorFixture.deviceToken(pushes), environment: .sandbox, payload: Array("{}".utf8)))
                codes.insert(outcome.code)
                #expect(outcome.disposition == .retry)
                pushes += 1
                try await Task.sleep(for: .milliseconds(2))  // a caller retrying as fast as it can
            }
            let attempts = client.connectAttempts
            await client.shutdown()
            #expect(codes == ["connect-failed"])
            // It keeps trying (more than once) but backs off: far fewer connects than pushes, bounded over 2 s
            // (50 ms … 400 ms full-jitter backoff allows about a dozen; a hot loop would make hundreds).
            #expect(attempts >= 2)
            #expect(attempts <= 60, "\(attempts) connects for \(pushes) pushes")
            #expect(pushes > attempts * 3, "\(attempts) connects for \(pushes) pushes")
        }

        /// A local port nothing listens on (bound, then closed).
        static func refusingPort() async throws -> Int {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .bind(host: "127.0.0.1", port: 0).get()
            let port = try #require(channel.localAddress?.port)
            try await channel.close()
            return port
        }
    }
}
