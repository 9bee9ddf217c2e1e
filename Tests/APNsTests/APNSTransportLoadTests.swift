import APNsSimulator
import Foundation
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import Testing

@testable import APNs

extension APNSIntegration {
    /// The transport under load without faults: what push-worker relies on to ring each phone exactly once.
    @Suite struct APNSTransportLoadTests {
        /// Sends `count` pushes at once through one client and returns their outcomes.
        static func sendAtOnce(_ fixture: SimulatorFixture, count: Int, timeout: Duration? = nil) async -> [APNSOutcome] {
            await withTaskGroup(of: APNSOutcome.self) { group in
                for n in 0..<count {
                    group.addTask { await fixture.client.send(fixture.push(token: n, timeout: timeout)) }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }

        static func summary(_ outcomes: [APNSOutcome]) -> [String: Int] {
            Dictionary(grouping: outcomes, by: \.code).mapValues(\.count)
        }

        @Test func twoThousandConcurrentPushesThroughOneClientAreAllSentOnce() async throws {
            try await SimulatorFixture.run { fixture in
                let outcomes = await Self.sendAtOnce(fixture, count: 2_000)
                #expect(outcomes.count == 2_000)
                #expect(outcomes.allSatisfy { $0.isSent }, "\(Self.summary(outcomes))")
                // Nothing needed a transparent retry, no connection was lost or replaced.
                #expect(outcomes.allSatisfy { $0.attempts == 1 })
                let stats = fixture.simulator.stats()
                #expect(stats.connectionsOpened == 2)
                #expect(stats.accepted == 2_000)
                #expect(Set(fixture.simulator.pushes().map(\.deviceToken)).count == 2_000)
            }
        }

        @Test func manyCancelledStreamsDoNotTakeTheConnectionDown() async throws {
            // 300 pushes time out: the client cancels each stream it wrote (RST_STREAM), and the answers still
            // arrive later. The connection must survive both: more resets than a server's default flood limit
            // (200 in 30 s), and late answers for more reset streams than NIO remembers by default (32) — each
            // of those would be a STREAM_CLOSED connection error. (A push whose deadline passed before it could
            // be written, on a slow debug build, ends `queue-timeout` instead.)
            try await SimulatorFixture.run(
                simulator: { $0.faults.latency = .fixed(milliseconds: 600) },
                client: { $0.connectionsPerPool = 1 }
            ) { fixture in
                let warm = await fixture.client.send(fixture.push(token: 9_999))
                #expect(warm.isSent)
                let timedOut = await Self.sendAtOnce(fixture, count: 300, timeout: .milliseconds(200))
                #expect(timedOut.allSatisfy { $0.error?.code == .timeout || $0.error?.code == .queueTimeout }, "\(Self.summary(timedOut))")
                #expect(timedOut.filter { $0.error?.code == .timeout }.count > 32, "\(Self.summary(timedOut))")
                fixture.simulator.setFaults(.init())
                let after = await Self.sendAtOnce(fixture, count: 300)
                #expect(after.allSatisfy { $0.isSent }, "\(Self.summary(after))")
                #expect(fixture.simulator.stats().connectionsOpened == 1)
            }
        }

        @Test func streamsRefusedByAGoAwayAreRetriedWithoutLosingTheConnection() async throws {
            // GOAWAY after 100 streams while ~1000 are in flight: the hundreds above the last stream id are
            // refused (stream errors on the server). Every push must still be sent exactly once, none lost.
            // Generous deadline: ten reconnects (TLS handshakes) in a debug build on a busy machine take a while,
            // and this test is about losses, not speed.
            try await SimulatorFixture.run(
                simulator: { $0.faults.goAwayAfterStreams = 100 },
                client: { $0.requestTimeout = .seconds(100) },
                timeLimit: 150
            ) { fixture in
                let outcomes = await Self.sendAtOnce(fixture, count: 1_000)
                #expect(outcomes.allSatisfy { $0.isSent }, "\(Self.summary(outcomes))")
                #expect(!outcomes.contains { $0.error?.code == .connectionLost })
                #expect(fixture.simulator.stats().goAwaysSent >= 5)
                #expect(fixture.simulator.pushes().count == 1_000)
            }
        }

        @Test func aStreamLimitLoweredBelowTheStreamsInFlightMakesRequestsWaitNotFail() async throws {
            // The server lowers MAX_CONCURRENT_STREAMS from 1000 to 3 while 60 slow pushes are in flight: requests
            // the pool already handed to the connection wait there for a free stream instead of being refused.
            try await SimulatorFixture.run(
                simulator: { $0.faults.latency = .fixed(milliseconds: 100) },
                client: { $0.connectionsPerPool = 1 }
            ) { fixture in
                _ = await fixture.client.send(fixture.push(token: 9_999))  // connection up, limit 1000 learned
                async let first = Self.sendAtOnce(fixture, count: 60)
                try await Task.sleep(for: .milliseconds(30))
                var faults = APNSSimulatorFaults()
                faults.latency = .fixed(milliseconds: 100)
                faults.maxConcurrentStreams = 3
                fixture.simulator.setFaults(faults)
                let outcomes = await first
                #expect(outcomes.allSatisfy { $0.isSent }, "\(Self.summary(outcomes))")
                let later = await Self.sendAtOnce(fixture, count: 12)
                #expect(later.allSatisfy { $0.isSent }, "\(Self.summary(later))")
                #expect(later.allSatisfy { $0.attempts == 1 })
                #expect(fixture.simulator.stats().connectionsOpened == 1)
                #expect(fixture.simulator.stats().accepted == 73)
            }
        }

        @Test func aServerChangingItsStreamLimitOftenDoesNotMakeTheClientCloseItsConnection() async throws {
            // 400 SETTINGS frames (MAX_CONCURRENT_STREAMS 2 ↔ 1000) while pushes flow: twice swift-nio-http2's
            // default flood limit for SETTINGS/PING frames (200 in 30 s), which a server-oriented configuration
            // answers by closing the connection with ENHANCE_YOUR_CALM.
            try await SimulatorFixture.run(client: { $0.connectionsPerPool = 1 }) { fixture in
                #expect(await fixture.client.send(fixture.push(token: 0)).isSent)
                let flapping = Task {
                    for change in 0..<400 {
                        fixture.simulator.setFaults(.init(maxConcurrentStreams: change % 2 == 0 ? 2 : 1000))
                        try await Task.sleep(for: .milliseconds(2))
                    }
                }
                var outcomes: [APNSOutcome] = []
                for wave in 0..<20 {
                    outcomes += await withTaskGroup(of: APNSOutcome.self) { group in
                        for n in 0..<50 { group.addTask { await fixture.client.send(fixture.push(token: 1 + wave * 50 + n)) } }
                        return await group.reduce(into: []) { $0.append($1) }
                    }
                }
                try await flapping.value
                outcomes += await Self.sendAtOnce(fixture, count: 50)
                #expect(outcomes.allSatisfy { $0.isSent }, "\(Self.summary(outcomes))")
                #expect(fixture.simulator.stats().connectionsOpened == 1)
            }
        }

        @Test func aServerRefusingBurstsOfStreamsDoesNotMakeTheClientCloseItsConnection() async throws {
            // ~30 % of streams refused (REFUSED_STREAM) among 1,000 concurrent pushes: some 400 RST_STREAM frames
            // in a second, over swift-nio-http2's default flood limit (200 in 30 s). Refused streams are retried
            // on the same connection, which stays up.
            try await SimulatorFixture.run(
                simulator: { $0.faults.refusedStreamRate = 0.3 },
                client: { $0.connectionsPerPool = 1 }
            ) { fixture in
                let outcomes = await Self.sendAtOnce(fixture, count: 1_000)
                #expect(outcomes.allSatisfy { $0.isSent }, "\(Self.summary(outcomes))")
                #expect(outcomes.contains { $0.attempts > 1 })
                let stats = fixture.simulator.stats()
                #expect(stats.streamsRefused > 250, "\(stats)")
                #expect(stats.connectionsOpened == 1)
                #expect(stats.accepted == 1_000)
            }
        }

        @Test func aConnectionOutOfStreamIDsRetiresAndItsReplacementTakesOver() async throws {
            // Each connection starts 8 ids before the end of HTTP/2's 2^31 id space: after 8 pushes it sends
            // GOAWAY, finishes and closes, and the pool opens another. Every push is still sent, none lost.
            try await SimulatorFixture.run(client: {
                $0.connectionsPerPool = 1
                $0.firstStreamID = 0x7fff_fff1
            }) { fixture in
                var outcomes: [APNSOutcome] = []
                for wave in 0..<6 {
                    outcomes += await withTaskGroup(of: APNSOutcome.self) { group in
                        for n in 0..<5 { group.addTask { await fixture.client.send(fixture.push(token: wave * 5 + n)) } }
                        return await group.reduce(into: []) { $0.append($1) }
                    }
                }
                #expect(outcomes.count == 30)
                #expect(outcomes.allSatisfy { $0.isSent }, "\(Self.summary(outcomes))")
                #expect(fixture.simulator.stats().connectionsOpened >= 4)
                #expect(fixture.simulator.stats().accepted == 30)
            }
        }

        @Test func aPushThatWaitedForAStreamUntilItsDeadlineWasNotSent() async throws {
            // One stream per connection, held by a slow push: the second waits in the queue and expires there.
            try await SimulatorFixture.run(
                simulator: {
                    $0.maxConcurrentStreams = 1
                    $0.faults.latency = .fixed(milliseconds: 800)
                },
                client: { $0.connectionsPerPool = 1 }
            ) { fixture in
                _ = await fixture.client.send(fixture.push(token: 1))  // connection up, stream limit learned
                async let slow = fixture.client.send(fixture.push(token: 2))
                try await Task.sleep(for: .milliseconds(100))
                let queued = await fixture.client.send(fixture.push(token: 3, timeout: .milliseconds(200)))
                #expect(queued.error?.code == .queueTimeout)
                #expect(queued.error?.wasNotSent == true)
                #expect(queued.disposition == .retry)
                #expect(await slow.isSent)
                #expect(!fixture.simulator.pushes().contains { $0.deviceToken == SimulatorFixture.deviceToken(3) })
            }
        }

        @Test func aPushWhoseDeadlineIsAboutToPassIsNotWritten() async throws {
            try await SimulatorFixture.run(client: { $0.connectionsPerPool = 1 }) { fixture in
                #expect(await fixture.client.send(fixture.push(token: 1)).isSent)  // connection up
                let late = await fixture.client.send(fixture.push(token: 2, timeout: .milliseconds(1)))
                #expect(late.error?.code == .queueTimeout, "\(late)")
                #expect(late.error?.wasNotSent == true)
                #expect(fixture.simulator.pushes().map(\.deviceToken) == [SimulatorFixture.deviceToken(1)])
            }
        }

        @Test func aRequestWaitingOnTheConnectionForAStreamUntilItsDeadlineIsNotWritten() async throws {
            // Straight on one connection (the pool would hold the second request back itself): the server allows
            // one stream, a slow request holds it, the second waits on the connection until its deadline.
            try await SimulatorFixture.run(simulator: {
                $0.maxConcurrentStreams = 1
                $0.allowUnauthenticated = true
                $0.faults.latency = .fixed(milliseconds: 800)
            }) { fixture in
                let (connection, maxStreams) = try await Self.connect(fixture)
                #expect(maxStreams == 1)
                async let slow = connection.execute(headers: Self.headers(token: 1), body: ByteBuffer(string: "{}"), deadline: .now() + .seconds(10))
                try await Task.sleep(for: .milliseconds(100))
                let waiting = await connection.execute(headers: Self.headers(token: 2), body: ByteBuffer(string: "{}"), deadline: .now() + .milliseconds(200))
                guard case .failed(.expired) = waiting else { Issue.record("expected expired, got \(waiting)"); return }
                let passed = await connection.execute(headers: Self.headers(token: 3), body: ByteBuffer(string: "{}"), deadline: .now())
                guard case .failed(.expired) = passed else { Issue.record("expected expired, got \(passed)"); return }
                guard case .response(200, _, _, _) = await slow else { Issue.record("the slow request is answered"); return }
                #expect(fixture.simulator.pushes().map(\.deviceToken) == [SimulatorFixture.deviceToken(1)])
                try await connection.close().get()
            }
        }

        /// TCP_NODELAY is an option of the TCP level. Given as a socket-level option, its number (1) is
        /// SO_DEBUG, which a process without CAP_NET_ADMIN may not set: every connect failed with EACCES
        /// in the images, which run as uid 10001 (found by running deploy/ as written), while it
        /// passed as root and left Nagle's algorithm on.
        @Test func aConnectionSetsTCPNoDelayAndNotSODebug() async throws {
            try await SimulatorFixture.run(simulator: { $0.allowUnauthenticated = true }) { fixture in
                let (connection, _) = try await Self.connect(fixture)
                let noDelay = try await connection.channel.getOption(.tcpOption(.tcp_nodelay)).get()
                let debug = try await connection.channel.getOption(.socket(SocketOptionLevel(SOL_SOCKET), SO_DEBUG)).get()
                #expect(noDelay != 0)
                #expect(debug == 0)
                try await connection.close().get()
            }
        }

        /// One connection to the fixture's simulator, outside any pool.
        static func connect(_ fixture: SimulatorFixture) async throws -> (APNSConnection, Int) {
            let configuration = fixture.client.configuration
            let tls = try NIOSSLContext(configuration: configuration.makeTLSConfiguration(clientCertificate: nil))
            return try await APNSConnection.connect(
                id: 1, endpoint: configuration.sandboxEndpoint, tlsContext: tls, eventLoop: MultiThreadedEventLoopGroup.singleton.next(),
                configuration: configuration, delegate: IgnoringDelegate()
            ).get()
        }

        static func headers(token: Int) -> HPACKHeaders {
            [
                ":method": "POST", ":scheme": "https", ":authority": "localhost", ":path": "/3/device/" + SimulatorFixture.deviceToken(token),
                "apns-push-type": "voip", "apns-topic": SimulatorFixture.bundleID + ".voip",
            ]
        }
    }
}

/// A pool stand-in that ignores connection events.
final class IgnoringDelegate: APNSConnectionDelegate {
    func connectionMaxStreamsChanged(id: Int, maxStreams: Int) {}
    func connectionAnswered(id: Int) {}
    func connectionDraining(id: Int, goAway: APNSGoAway?, error: APNSError?) {}
    func connectionClosed(id: Int, error: APNSError?) {}
}
