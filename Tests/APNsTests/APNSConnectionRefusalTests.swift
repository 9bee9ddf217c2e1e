import APNsSimulator
import Foundation
import NIOCore
import Testing

@testable import APNs

extension APNSIntegration {
    /// APNs closing connections with a reason (GOAWAY debug data) or answering `IdleTimeout`.
    @Suite struct APNSConnectionRefusalTests {
        @Test func aConnectionTurnedAwayWithAReasonEndsPushesWithThatReasonAndReconnectsBackOff() async throws {
            // Like APNs with a certificate for the other environment: every new connection gets
            // GOAWAY(last-stream-id 0, {"reason":"BadCertificateEnvironment"}) on its first request.
            try await SimulatorFixture.run(
                simulator: { $0.faults.rejectConnections = "BadCertificateEnvironment" },
                client: {
                    $0.connectionsPerPool = 1
                    $0.reconnectMaximumBackoff = .seconds(2)
                }
            ) { fixture in
                var pushes = 0
                var codes: [String: Int] = [:]
                var dispositions: Set<APNSDisposition> = []
                let end = ContinuousClock.now + .seconds(3)
                while ContinuousClock.now < end {
                    let outcome = await fixture.client.send(fixture.push(token: pushes))
                    codes[outcome.code, default: 0] += 1
                    dispositions.insert(outcome.disposition)
                    #expect(outcome.attempts <= 1, "\(outcome)")
                    pushes += 1
                    try await Task.sleep(for: .milliseconds(2))  // a caller retrying as fast as it can
                }
                let opened = fixture.simulator.stats().connectionsOpened
                // Every push ends with Apple's reason and what it means (alert, stop the backlog), not "retry".
                #expect(codes.keys.sorted() == ["BadCertificateEnvironment"], "\(codes)")
                #expect(dispositions == [.credentialsInvalid])
                // Reconnects back off (100 ms doubling up to 2 s, full jitter: under ten in 3 s), instead of one or more
                // TLS handshakes per push.
                #expect(opened >= 2)
                #expect(opened <= 20, "\(opened) connections for \(pushes) pushes")
                #expect(pushes > opened * 3, "\(opened) connections for \(pushes) pushes")
                #expect(fixture.client.connectAttempts == opened)
                #expect(fixture.simulator.pushes().isEmpty)

                // Once the server accepts the client again, pushes go through (after the backoff).
                fixture.simulator.setFaults(.init())
                var sent = false
                for n in 0..<200 where !sent {
                    sent = await fixture.client.send(fixture.push(token: 10_000 + n)).isSent
                    if !sent { try await Task.sleep(for: .milliseconds(50)) }
                }
                #expect(sent)
            }
        }

        @Test func anIdleTimeoutGoAwayIsAConnectionEventAndThePushesAreSent() async throws {
            try await SimulatorFixture.run(
                simulator: {
                    $0.faults.goAwayAfterStreams = 3
                    $0.faults.goAwayReason = "IdleTimeout"
                },
                client: { $0.connectionsPerPool = 1 }
            ) { fixture in
                for n in 0..<12 {
                    let outcome = await fixture.client.send(fixture.push(token: n))
                    #expect(outcome.isSent, "\(outcome)")
                }
                #expect(fixture.simulator.stats().connectionsOpened >= 4)
            }
        }

        @Test func anIdleTimeoutAnswerReplacesTheConnectionAndThePushIsRetried() async throws {
            try await SimulatorFixture.run(
                simulator: { $0.faults.tokenOutcomes = [SimulatorFixture.deviceToken(7): .status(400, reason: "IdleTimeout")] },
                client: { $0.connectionsPerPool = 1 }
            ) { fixture in
                #expect(await fixture.client.send(fixture.push(token: 1)).isSent)
                let idle = await fixture.client.send(fixture.push(token: 7))
                // Retried once on a new connection (this simulator says it again), then a transient outcome.
                #expect(idle.attempts == 2, "\(idle)")
                #expect(idle.reason == .idleTimeout)
                #expect(idle.disposition == .retry)
                #expect(fixture.simulator.stats().connectionsOpened == 2)
                #expect(await fixture.client.send(fixture.push(token: 2)).isSent)
            }
        }
    }
}
