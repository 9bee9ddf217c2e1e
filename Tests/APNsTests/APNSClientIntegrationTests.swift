import CallpushTestSupport
import APNsSimulator
import Foundation
import Locking
import NIOCore
import Synchronization
import Testing

@testable import APNs

extension APNSIntegration {
    @Suite struct APNSClientIntegrationTests {
        @Test func sendsAVoIPPushWithTheRightRequest() async throws {
            try await SimulatorFixture.run { fixture in
                let id = UUID()
                var push = fixture.push(token: 42, payload: #"{"callId":"abc"}"#)
                push.apnsID = id
                push.expiration = .at(Date(timeIntervalSince1970: 1_900_000_000))
                let outcome = await fixture.client.send(push)
                #expect(outcome.disposition == .sent)
                #expect(outcome.status == 200)
                #expect(outcome.apnsID == id.uuidString.lowercased())
                #expect(outcome.uniqueID != nil)  // sandbox
                #expect(outcome.error == nil && outcome.reason == nil)

                let recorded = try #require(fixture.simulator.pushes().first)
                #expect(recorded.deviceToken == SimulatorFixture.deviceToken(42))
                #expect(recorded.payload == #"{"callId":"abc"}"#)
                #expect(recorded.apnsID == id.uuidString.lowercased())
                #expect(recorded.headers["apns-push-type"] == "voip")
                #expect(recorded.headers["apns-topic"] == "com.example.rider.voip")
                #expect(recorded.headers["apns-priority"] == "10")
                #expect(recorded.headers["apns-expiration"] == "1900000000")
            }
        }

        @Test func apnsRejectionsBecomeTypedOutcomes() async throws {
            let gone = Date(timeIntervalSince1970: 1_750_000_000.5)
            try await SimulatorFixture.run(simulator: { config in
                config.faults.tokenOutcomes = [
                    SimulatorFixture.deviceToken(1): .unregistered(timestamp: gone),
                    SimulatorFixture.deviceToken(2): .badDeviceToken,
                    SimulatorFixture.deviceToken(3): .status(500, reason: "InternalServerError"),
                    SimulatorFixture.deviceToken(4): .status(400, reason: "FancyNewReason"),
                    SimulatorFixture.deviceToken(5): .tooManyRequests,
                ]
            }) { fixture in
                let unregistered = await fixture.client.send(fixture.push(token: 1))
                #expect(unregistered.status == 410)
                #expect(unregistered.reason == .unregistered)
                #expect(unregistered.disposition == .tokenDead)
                #expect(unregistered.timestamp == gone)

                let bad = await fixture.client.send(fixture.push(token: 2))
                #expect(bad.reason == .badDeviceToken && bad.disposition == .tokenDead)

                let serverError = await fixture.client.send(fixture.push(token: 3))
                #expect(serverError.status == 500 && serverError.disposition == .retry)

                let unknown = await fixture.client.send(fixture.push(token: 4))
                #expect(unknown.reason == .unknown("FancyNewReason"))
                #expect(unknown.disposition == .requestInvalid)

                let tooMany = await fixture.client.send(fixture.push(token: 5))
                #expect(tooMany.reason == .tooManyRequests && tooMany.disposition == .retry)
            }
        }

        @Test func aBatchOfPushesGetsEachItsOwnOutcomeInOrder() async throws {
            try await SimulatorFixture.run(simulator: { config in
                config.faults.tokenOutcomes = [
                    SimulatorFixture.deviceToken(2): .badDeviceToken,
                    SimulatorFixture.deviceToken(4): .status(500, reason: "InternalServerError"),
                ]
            }) { fixture in
                var pushes = (1...6).map { fixture.push(token: $0) }
                pushes[4].app = APNSAppID("no-such-app")
                let outcomes = await fixture.client.send(pushes)
                #expect(outcomes.count == pushes.count)
                #expect(outcomes.map(\.status) == [200, 400, 200, 500, nil, 200])
                #expect(outcomes.map(\.disposition) == [.sent, .tokenDead, .sent, .retry, .requestInvalid, .sent])
                #expect(outcomes.map(\.apnsID) == pushes.map { $0.apnsID.uuidString.lowercased() }, "each outcome is its own push's")
                let recorded = Set(fixture.simulator.pushes().map(\.deviceToken))
                #expect(recorded == Set([1, 3, 6].map(SimulatorFixture.deviceToken)), "the unknown app's push is not sent")
            }
        }

        @Test func aBatchOfPushesReportsEachAnswerOnceWithItsIndex() async throws {
            try await SimulatorFixture.run(simulator: { config in
                config.faults.tokenOutcomes = [SimulatorFixture.deviceToken(2): .badDeviceToken]
            }) { fixture in
                var pushes = (1...5).map { fixture.push(token: $0) }
                pushes[3].app = APNSAppID("no-such-app")
                let answers = Locked<[(Int, APNSOutcome)]>([])
                await fixture.client.send(pushes) { index, outcome in answers.withLock { $0.append((index, outcome)) } }
                let byIndex = Dictionary(grouping: answers.withLock { $0 }, by: \.0)
                #expect(byIndex.keys.sorted() == Array(pushes.indices), "every push is answered")
                #expect(byIndex.values.allSatisfy { $0.count == 1 }, "each push is answered once")
                #expect(pushes.indices.map { byIndex[$0]?.first?.1.disposition } == [.sent, .tokenDead, .sent, .requestInvalid, .sent])
                #expect(pushes.indices.map { byIndex[$0]?.first?.1.apnsID } == pushes.map { $0.apnsID.uuidString.lowercased() },
                        "each answer is its own push's")
            }
        }

        /// A run's pushes are written by callback, without a task each; those that must wait for a
        /// stream (`maxConcurrentStreamsIsHonoured`), or be tried again, go on as a single push would.
        /// Each still ends exactly once.
        @Test func aBatchsPushesRefusedByAGoAwayAreTriedAgainAndSent() async throws {
            try await SimulatorFixture.run(simulator: { $0.faults.goAwayAfterStreams = 7 }) { fixture in
                let pushes = (0..<40).map { fixture.push(token: $0) }
                let answers = Locked<[Int: [APNSOutcome]]>([:])
                await fixture.client.send(pushes) { index, outcome in answers.withLock { $0[index, default: []].append(outcome) } }
                let byIndex = answers.withLock { $0 }
                #expect(byIndex.keys.sorted() == Array(pushes.indices) && byIndex.values.allSatisfy { $0.count == 1 }, "each push ends once")
                let outcomes = pushes.indices.compactMap { byIndex[$0]?.first }
                #expect(outcomes.allSatisfy { $0.isSent }, "\(Dictionary(grouping: outcomes, by: \.code).mapValues(\.count))")
                #expect(fixture.simulator.stats().goAwaysSent >= 1)
                #expect(outcomes.contains { $0.attempts > 1 }, "some were refused by a GOAWAY and sent again")
                #expect(Set(fixture.simulator.pushes().map(\.deviceToken)) == Set(pushes.map(\.deviceToken)))
            }
        }

        @Test func aBatchRenewsAnExpiredProviderTokenAndTriesAgain() async throws {
            let clock = SettableClock(Date().addingTimeInterval(-61 * 60))
            try await SimulatorFixture.run(now: clock.now) { fixture in
                let pushes = (0..<8).map { fixture.push(token: $0) }
                let outcomes = await fixture.client.send(pushes)
                #expect(outcomes.allSatisfy { $0.reason == .expiredProviderToken })
                #expect(outcomes.contains { $0.attempts == 2 }, "the token was renewed and the push tried again")
                #expect(outcomes.allSatisfy { $0.attempts <= 2 }, "renewed at most once per push")
                #expect(fixture.simulator.pushes().isEmpty)
            }
        }

        @Test func payloadOverTheLimitIsRefusedBeforeSending() async throws {
            try await SimulatorFixture.run { fixture in
                let big = String(repeating: "x", count: 5121)
                let outcome = await fixture.client.send(fixture.push(payload: big))
                #expect(outcome.error?.code == .payloadTooLarge)
                #expect(outcome.disposition == .requestInvalid)
                #expect(outcome.attempts == 0)
                let badToken = APNSVoIPPush(app: "rider", deviceToken: "not-hex", environment: .sandbox, payload: Array("{}".utf8))
                #expect(await fixture.client.send(badToken).error?.code == .invalidDeviceToken)
                let unknownApp = APNSVoIPPush(app: "nope", deviceToken: "abcd", environment: .sandbox, payload: Array("{}".utf8))
                #expect(await fixture.client.send(unknownApp).error?.code == .unknownApp)
                #expect(fixture.simulator.pushes().isEmpty)
            }
        }

        @Test func unansweredRequestTimesOutWithinItsDeadline() async throws {
            try await SimulatorFixture.run { fixture in
                // Connected first: on a loaded machine the TLS handshake alone can outlast 300 ms,
                // and a push that never got a stream is `queue-timeout`, not this test's case.
                #expect(await fixture.client.send(fixture.push(token: 3)).isSent)
                fixture.simulator.setFaults(.init(noResponse: true))
                let outcome = await fixture.client.send(fixture.push(timeout: .milliseconds(300)))
                #expect(outcome.error?.code == .timeout)
                #expect(outcome.disposition == .retry)
                // The connection still works for others once the fault is gone.
                fixture.simulator.setFaults(.init())
                #expect(await fixture.client.send(fixture.push(token: 2)).isSent)
            }
        }

        @Test func maxConcurrentStreamsIsHonoured() async throws {
            try await SimulatorFixture.run(
                simulator: {
                    $0.maxConcurrentStreams = 5
                    $0.faults.latency = .fixed(milliseconds: 5)
                },
                client: { $0.connectionsPerPool = 1 }
            ) { fixture in
                let outcomes = await withTaskGroup(of: APNSOutcome.self) { group in
                    for n in 0..<200 { group.addTask { await fixture.client.send(fixture.push(token: n)) } }
                    return await group.reduce(into: []) { $0.append($1) }
                }
                #expect(outcomes.count == 200)
                #expect(outcomes.allSatisfy { $0.isSent }, "\(Dictionary(grouping: outcomes, by: \.code).mapValues(\.count))")
                // Never more streams than allowed: no stream had to be refused and retried.
                #expect(outcomes.allSatisfy { $0.attempts == 1 })
                #expect(fixture.simulator.pushes().count == 200)
                // A run of pushes (by callback, not a task each) beyond the limit waits for streams the same way.
                let run = (200..<260).map { fixture.push(token: $0) }
                let answered = await fixture.client.send(run)
                #expect(answered.allSatisfy { $0.isSent && $0.attempts == 1 }, "\(Dictionary(grouping: answered, by: \.code).mapValues(\.count))")
                #expect(answered.map(\.apnsID) == run.map { $0.apnsID.uuidString.lowercased() })
                #expect(fixture.simulator.pushes().count == 260)
            }
        }

        @Test func expiredProviderTokenIsRenewedOnceWithoutALoop() async throws {
            // The client's clock is 61 minutes behind: every token it signs is already expired for the simulator.
            let clock = SettableClock(Date().addingTimeInterval(-61 * 60))
            try await SimulatorFixture.run(now: clock.now) { fixture in
                let first = await fixture.client.send(fixture.push(token: 1))
                #expect(first.reason == .expiredProviderToken)
                #expect(first.disposition == .renewTokenAndRetry)
                #expect(first.attempts == 2)  // renewed once, retried once

                // The renewed token is rejected as well: no renewal loop, one attempt.
                let second = await fixture.client.send(fixture.push(token: 2))
                #expect(second.reason == .expiredProviderToken)
                #expect(second.attempts == 1)

                // With the clock right, the next scheduled renewal gives a token the simulator accepts.
                clock.advance(minutes: 61)
                let third = await fixture.client.send(fixture.push(token: 3))
                #expect(third.isSent)
                #expect(fixture.simulator.pushes().map(\.deviceToken) == [SimulatorFixture.deviceToken(3)])
            }
        }

        @Test func tenThousandPushesThroughGoAwaysAndADroppedConnectionEachEndOnce() async throws {
            try await SimulatorFixture.run(
                simulator: { $0.faults.goAwayAfterStreams = 1000 },
                client: { $0.requestTimeout = .seconds(20) },
                timeLimit: 240  // debug builds on a shared 2-core machine manage ~100-200 pushes/s
            ) { fixture in
                let total = 10_000
                let finished = Counter()
                let counts = await withTaskGroup(of: APNSOutcome.self) { group in
                    var sent = 0
                    var failed = 0
                    var failureCodes: Set<String> = []
                    var started = 0
                    var droppedFaultSet = false
                    func add() {
                        let n = started
                        started += 1
                        group.addTask {
                            let outcome = await fixture.client.send(fixture.push(token: n))
                            finished.increment()
                            return outcome
                        }
                    }
                    for _ in 0..<50 { add() }
                    while let outcome = await group.next() {
                        if outcome.isSent { sent += 1 } else { failed += 1; failureCodes.insert(outcome.code); if failed < 5 { print("failure: \(outcome) \(outcome.error.map { "\($0)" } ?? "")") } }
                        let done = sent + failed
                        if done == 3000, !droppedFaultSet {
                            droppedFaultSet = true
                            fixture.simulator.setFaults(.init(goAwayAfterStreams: 1000, dropConnectionAfterStreams: 150))
                        }
                        if done == 3400 { fixture.simulator.setFaults(.init(goAwayAfterStreams: 1000)) }
                        if started < total { add() }
                    }
                    return (sent, failed, failureCodes)
                }
                print("10k: sent \(counts.0) failed \(counts.1) stats \(fixture.simulator.stats())")
                #expect(counts.0 + counts.1 == total)
                #expect(finished.value == total)
                let stats = fixture.simulator.stats()
                #expect(stats.goAwaysSent >= 5)
                #expect(stats.connectionsDropped >= 1)
                #expect(fixture.simulator.pushes().count >= counts.0)
                // GOAWAY-refused streams are retried transparently: only streams in flight on dropped connections fail.
                #expect(counts.2.isSubset(of: ["connection-lost"]))
                #expect(counts.0 >= total / 2)
            }
        }
    }
}

/// A counter shared by test tasks.
final class Counter: Sendable {
    private let storage = Atomic<Int>(0)
    func increment() { storage.add(1, ordering: .relaxed) }
    var value: Int { storage.load(ordering: .relaxed) }
}
