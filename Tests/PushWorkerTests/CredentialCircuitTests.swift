import CallContract
import Foundation
import Testing
@testable import PushWorker

@Suite struct CredentialCircuitStates {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func refusalSuspendsTheAppThenOneProbeDecides() {
        let circuit = CredentialCircuit(initialCoolDown: .seconds(10), maximumCoolDown: .seconds(300))
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0) == .allowed)
        let until = circuit.record(.init(app: "rider", environment: .production), .refused(reason: "InvalidProviderToken"), probe: false, now: t0)
        #expect(until == t0.addingTimeInterval(10))
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(5)) == .suspended(until: t0.addingTimeInterval(10), reason: "InvalidProviderToken"))
        #expect(circuit.admit(.init(app: "driver", environment: .production), now: t0.addingTimeInterval(5)) == .allowed, "other apps are not affected")
        #expect(circuit.suspendedApps(now: t0.addingTimeInterval(5)) == ["rider"])

        // Cool-down over: exactly one delivery probes.
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(11)) == .probe)
        guard case .suspended = circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(11)) else {
            Issue.record("a second delivery went out while the probe was in flight")
            return
        }
        // The probe is refused again: the cool-down doubles.
        let again = circuit.record(.init(app: "rider", environment: .production), .refused(reason: "InvalidProviderToken"), probe: true, now: t0.addingTimeInterval(12))
        #expect(again == t0.addingTimeInterval(32))
        // Next probe accepted: the app is back.
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(33)) == .probe)
        circuit.record(.init(app: "rider", environment: .production), .accepted, probe: true, now: t0.addingTimeInterval(33))
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(33)) == .allowed)
        #expect(circuit.suspendedApps(now: t0.addingTimeInterval(33)).isEmpty)
    }

    @Test func answersOfPushesAlreadyInFlightDoNotCloseOrExtendTheCircuit() {
        let circuit = CredentialCircuit(initialCoolDown: .seconds(10))
        circuit.record(.init(app: "rider", environment: .production), .refused(reason: "BadCertificate"), probe: false, now: t0)
        circuit.record(.init(app: "rider", environment: .production), .accepted, probe: false, now: t0.addingTimeInterval(1))
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(2)) != .allowed, "a straggler's success does not reopen pushes")
        #expect(circuit.record(.init(app: "rider", environment: .production), .refused(reason: "BadCertificate"), probe: false, now: t0.addingTimeInterval(3)) == nil)
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(10.5)) == .probe, "stragglers do not extend the cool-down")
    }

    @Test func inconclusiveOrAbandonedProbeLetsTheNextDeliveryProbe() {
        let circuit = CredentialCircuit(initialCoolDown: .seconds(10), probeBound: .seconds(30))
        circuit.record(.init(app: "rider", environment: .production), .refused(reason: "Forbidden"), probe: false, now: t0)
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(10)) == .probe)
        circuit.record(.init(app: "rider", environment: .production), .inconclusive, probe: true, now: t0.addingTimeInterval(11))
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(11)) == .probe)
        // That probe never reports (its task was cancelled): after the bound another may go.
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(20)) != .probe)
        #expect(circuit.admit(.init(app: "rider", environment: .production), now: t0.addingTimeInterval(42)) == .probe)
    }

    @Test func coolDownDoublesUpToTheCap() {
        let circuit = CredentialCircuit(initialCoolDown: .seconds(100), maximumCoolDown: .seconds(300))
        var now = t0
        var coolDowns: [TimeInterval] = []
        for _ in 0..<4 {
            let until = circuit.record(.init(app: "rider", environment: .production), .refused(reason: "Forbidden"), probe: true, now: now)
            coolDowns.append(until.map { $0.timeIntervalSince(now) } ?? -1)
            now = until ?? now
        }
        #expect(coolDowns == [100, 200, 300, 300])
    }
}

@Suite struct SuspendedApps {
    @Test func refusedCredentialsStopPushesForThatAppAndDeadLetterTheRest() async throws {
        let h = Harness(sender: ScriptedSender(fallback: .invalidProviderToken),
                        credentials: CredentialCircuit(initialCoolDown: .seconds(60)))
        #expect(try await h.process(.ring(makeRing())) == .finished(.failed))
        #expect(h.publisher.statuses.last?.error?.code == "InvalidProviderToken")

        for offset in 101...105 {
            #expect(try await h.process(.ring(makeRing()), offset: Int64(offset)) == .finished(.failed))
        }
        #expect(h.sender.sent.count == 1, "APNs is contacted once, not for the whole backlog")
        let suspended = h.publisher.statuses.dropFirst()
        #expect(suspended.count == 5)
        #expect(suspended.allSatisfy { $0.error?.code == DeliveryProcessor.suspendedCode && $0.apns == nil && $0.attempt == 0 })
        #expect(h.publisher.deadLetters.count == 6, "every unpushed call is in the DLQ, ready for replay")
        #expect(h.publisher.deadLetters.dropFirst().allSatisfy { $0.headers["callpush-error"] == "app-suspended" })

        // Another app keeps ringing.
        let other = makeRing(token: String(repeating: "cd", count: 32), app: "taxi")
        h.sender.script(other.device.token, [.ok])
        #expect(try await h.process(.ring(other), offset: 200) == .finished(.sent))
    }

    @Test func afterTheCoolDownAProbeResumesPushes() async throws {
        let clock = ManualClock()
        let h = Harness(credentials: CredentialCircuit(initialCoolDown: .seconds(10)), now: { clock.now() })
        let first = makeRing()
        h.sender.script(first.device.token, [.invalidProviderToken])
        #expect(try await h.process(.ring(first)) == .finished(.failed))
        clock.advance(by: 5)
        #expect(try await h.process(.ring(makeRing()), offset: 101) == .finished(.failed))
        #expect(h.sender.sent.count == 1)

        clock.advance(by: 6)
        // Credentials fixed (the fallback answers 200): the probe is sent, and so is the next call.
        #expect(try await h.process(.ring(makeRing()), offset: 102) == .finished(.sent))
        #expect(try await h.process(.ring(makeRing()), offset: 103) == .finished(.sent))
        #expect(h.sender.sent.count == 3)
    }
}
