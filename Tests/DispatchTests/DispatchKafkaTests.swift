import CallContract
import CallpushTestSupport
import Foundation
import Kafka
import Testing
@testable import DispatchService

/// dispatch on the embedded cluster: what reaches Kafka, idempotency, and Kafka outages.
@Suite(.serialized) struct DispatchKafkaTests {
    @Test func ringIsPublishedOncePerDeviceWithTheContractsExactFields() async throws {
        try await DispatchTestbed.with { bed in
            let callId = CallID.make()
            var body = ringBody(callId: callId, tokens: [hexToken(0xa1), hexToken(0xa2)])
            body["maxDurationSeconds"] = 300
            let answer = try await bed.post("/v1/calls", json(body))
            #expect(answer.status == 202, "\(answer.text)")
            let accepted = answer.json
            #expect(accepted["callId"] as? String == callId)
            let deliveries = try #require(accepted["deliveries"] as? [[String: Any]])
            #expect(deliveries.map { $0["deviceKey"] as? String } == [DeviceKey.make(token: hexToken(0xa1)), DeviceKey.make(token: hexToken(0xa2))])
            #expect(deliveries.allSatisfy { $0["state"] as? String == "queued" })

            let again = try await bed.post("/v1/calls", json(body))
            #expect(again.status == 202)
            #expect(again.body == answer.body)

            let records = try await bed.readAll(bed.topics.requests, partitions: 3, count: 3, seconds: 5)
            #expect(records.count == 2, "one event per device, and the repeat published nothing")
            #expect(Set(records.map(\.partition)).count == 1, "both events on the call's partition")
            for (index, record) in records.sorted(by: { $0.offset < $1.offset }).enumerated() {
                #expect(record.keyString == callId)
                let object = try #require(try JSONSerialization.jsonObject(with: Data(record.value)) as? [String: Any])
                #expect(Set(object.keys) == ["type", "callId", "app", "device", "caller", "hasVideo", "requestedAt", "ringDeadline",
                                             "maxDurationSeconds", "attributes", "replay", "tenant"])
                guard case .ring(let ring) = try CallRequest.decode(record.value) else {
                    Issue.record("not a ring event")
                    continue
                }
                #expect(ring.callId == callId)
                #expect(ring.app == "rider")
                #expect(ring.tenant == "test", "the tenant of the key that rang")
                #expect(ring.device == Device(token: hexToken(0xa1 + index), environment: .sandbox, id: "dev-\(index)"))
                #expect(ring.caller == Caller(handle: "driver-1", handleType: .generic, displayName: "Driver"))
                #expect(ring.ringDeadline.timeIntervalSince(ring.requestedAt) == 30)
                #expect(ring.maxDurationSeconds == 300)
                #expect(ring.attributes == ["rideId": "R-1"])
                #expect(ring.replay == 0)
                #expect(ContractCoding.format(ring.requestedAt) == accepted["requestedAt"] as? String)
            }
        }
    }

    @Test func kafkaDownAnswers503WithinTheBoundPublishesNothingAndRecovers() async throws {
        try await DispatchTestbed.with(configure: { $0.publishTimeout = .milliseconds(1_500); $0.readinessProbeInterval = .milliseconds(300) }) { bed in
            let warmUp = try await bed.post("/v1/calls", json(ringBody()))
            #expect(warmUp.status == 202)

            for broker in 1...3 { try bed.cluster.setBrokerDown(Int32(broker)) }
            let callId = CallID.make()
            let body = json(ringBody(callId: callId, tokens: [hexToken(0xd1), hexToken(0xd2)]))
            let started = ContinuousClock.now
            let refused = try await bed.post("/v1/calls", body)
            let elapsed = ContinuousClock.now - started
            #expect(refused.status == 503, "\(refused.text)")
            #expect(refused.headers["retry-after"] == "1")
            #expect(refused.contentType == "application/problem+json")
            // Bounded by the publish timeout (the brokers stay down: an unbounded publish would wait
            // for ever); the slack is for a loaded machine.
            #expect(elapsed < .milliseconds(1_500) + .seconds(8), "answered within the configured bound (took \(elapsed))")
            #expect(try await eventually(seconds: 15, every: .milliseconds(100)) { try await bed.get("/readyz").status == 503 },
                    "/readyz says Kafka is not reachable, so a load balancer stops sending rings here")

            for broker in 1...3 { try bed.cluster.setBrokerUp(Int32(broker)) }
            var accepted: HTTPAnswer?
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline {
                let answer = try await bed.post("/v1/calls", body)
                if answer.status == 202 {
                    accepted = answer
                    break
                }
                #expect(answer.status == 503)
                try await Task.sleep(for: .milliseconds(500))
            }
            #expect(accepted != nil, "requests succeed again once the brokers are back")
            #expect(try await eventually(seconds: 15, every: .milliseconds(100)) { try await bed.get("/readyz").status == 200 }, "ready again")

            let records = try await bed.readAll(bed.topics.requests, partitions: 3, count: 100, seconds: 6)
            let forCall = records.filter { $0.keyString == callId }
            #expect(forCall.count == 2, "exactly the two events of the accepted retry; nothing from the refused attempt")
        }
    }

    @Test func callsPublishedByOthersAreVisibleFromTheRequestsTopic() async throws {
        try await DispatchTestbed.with { bed in
            let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(kafka: DispatchTestbed.kafka(bed.cluster, "backend")),
                                             logger: quietLogger)
            let now = ContractCoding.truncatedToMilliseconds(Date())
            let ring = RingRequest(callId: CallID.make(), app: "rider", device: Device(token: hexToken(0xee), environment: .production, id: "x"),
                                   caller: Caller(handle: "h"), requestedAt: now, ringDeadline: now.addingTimeInterval(30), tenant: "test")
            var untagged = ring
            untagged.callId = CallID.make()
            untagged.tenant = nil
            for event in [untagged, ring] {
                _ = try await producer.send(KafkaProducerRecord(topic: bed.topics.requests, key: Array(event.callId.utf8),
                                                                value: Array(try CallRequest.ring(event).encoded())))
            }
            await producer.shutdown()
            let call = try await bed.waitForCall(ring.callId) { ($0["deliveries"] as? [[String: Any]])?.count == 1 }
            let delivery = try #require((call["deliveries"] as? [[String: Any]])?.first)
            #expect(delivery["state"] as? String == "queued")
            #expect(delivery["deviceId"] as? String == "x")
            #expect(call["complete"] as? Bool == false)
            #expect(try await bed.get("/v1/calls/\(untagged.callId)").status == 404, "a ring naming no tenant belongs to no API key")
        }
    }
}
