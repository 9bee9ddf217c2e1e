import APNsSimulator
import CallContract
import CallpushTestSupport
import Foundation
import Kafka
import Testing
@testable import PushWorker

/// Workers on the embedded cluster pushing through the real APNs client to the simulator.
@Suite(.serialized) struct WorkerWithSimulator {
    @Test func ringReachesTheSimulatorAsAVoIPPushAndIsReportedSent() async throws {
        try await WorkerTestbed.withSimulator(partitions: 2) { apns, bed in
            let worker = try bed.startWorker("worker-a", sender: apns.sender)
            let ring = makeRing()
            let statuses = try await bed.ringUntilEnded(ring)
            #expect(statuses.terminal(ring.callId) == [.sent])
            let pushes = apns.pushes(for: ring.device.token)
            try #require(pushes.count == 1)
            #expect(pushes[0].headers["apns-push-type"] == "voip")
            #expect(pushes[0].headers["apns-topic"] == "com.example.rider.voip")
            #expect(pushes[0].headers["apns-priority"] == "10")
            #expect(pushes[0].headers["apns-expiration"] == String(Int(ring.ringDeadline.timeIntervalSince1970)))
            #expect(try VoIPPayload.decode(Data(pushes[0].payload.utf8)).callId == ring.callId)
            await bed.stop([worker])
        }
    }

    @Test func unregisteredTokenEndsFailedWithTimestampAndDeadLetter() async throws {
        try await WorkerTestbed.withSimulator(partitions: 2) { apns, bed in
            let ring = makeRing()
            let unregisteredAt = Date(timeIntervalSince1970: 1_795_000_000)
            var faults = APNSSimulatorFaults()
            faults.tokenOutcomes[ring.device.token] = .unregistered(timestamp: unregisteredAt)
            apns.simulator.setFaults(faults)
            let worker = try bed.startWorker("worker-a", sender: apns.sender)
            let statuses = try await bed.ringUntilEnded(ring)
            #expect(statuses.terminal(ring.callId) == [.failed])
            let dlq = try await bed.readDeadLetters(count: 1, seconds: 20)
            try #require(dlq.count == 1)
            #expect(dlq[0].header(DeadLetterHeader.error)?.stringValue == "Unregistered")
            #expect(dlq[0].header(DeadLetterHeader.attempts)?.stringValue == "1")
            #expect(try CallRequest.decode(dlq[0].value).callId == ring.callId)
            let failed = try #require(bed.log.value.withLock { $0.latest(ring.callId) })
            #expect(failed.apns?.status == 410)
            #expect(failed.error?.code == "Unregistered")
            #expect(failed.apns?.timestamp == unregisteredAt)
            await bed.stop([worker])
        }
    }

    @Test func serviceUnavailableBurstIsRetriedAndSentBeforeTheDeadline() async throws {
        try await WorkerTestbed.withSimulator(partitions: 2) { apns, bed in
            let worker = try bed.startWorker("worker-a", sender: apns.sender)
            try await bed.produce([.ring(makeRing())])  // warm up: group joined, connection open
            _ = try await bed.collectStatuses(until: { $0.count(.sent) >= 1 }, seconds: 30)

            var faults = APNSSimulatorFaults()
            faults.errorRate = ErrorInjection(status: 503, probability: 1, startsAt: Date(), endsAt: Date().addingTimeInterval(TestTiming.scaled(seconds: 1.5)))
            apns.simulator.setFaults(faults)
            let ring = makeRing(token: hexToken(0xb0557), ringsFor: 20)
            let statuses = try await bed.ringUntilEnded(ring)
            try statuses.expectRetriedThenSentOnce(ring, arrivals: apns.pushes(for: ring.device.token).map(\.receivedAt))
            await bed.stop([worker])
        }
    }

    @Test func outageLongerThanTheDeadlineEndsExpiredAndNothingRingsLate() async throws {
        try await WorkerTestbed.withSimulator(partitions: 2) { apns, bed in
            var faults = APNSSimulatorFaults()
            faults.errorRate = ErrorInjection(status: 503, probability: 1)
            apns.simulator.setFaults(faults)
            let worker = try bed.startWorker("worker-a", sender: apns.sender)
            let ring = makeRing(ringsFor: 8)
            try await bed.produce([.ring(ring)])
            let statuses = try await bed.collectStatuses(until: { !$0.terminal(ring.callId).isEmpty }, seconds: 40)
            #expect(statuses.terminal(ring.callId) == [.expired])
            // The outage lasts past the ring deadline (the worker may give up just before it, when no
            // retry fits, while its last 503-bound request is still being answered: bounded by the
            // request timeout); then APNs heals.
            while Date() < ring.ringDeadline.addingTimeInterval(TestTiming.scaled(seconds: 3)) { try await Task.sleep(for: .milliseconds(50)) }
            apns.simulator.setFaults(APNSSimulatorFaults())
            try await Task.sleep(for: .seconds(1))
            #expect(apns.pushes(for: ring.device.token).isEmpty, "nothing rings after the deadline")
            await bed.stop([worker])
        }
    }
}
