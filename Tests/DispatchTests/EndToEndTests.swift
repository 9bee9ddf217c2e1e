import APNsSimulator
import CallContract
import CallpushTestSupport
import Foundation
import Testing
@testable import DispatchService

/// dispatch + a real push-worker + the APNs simulator on the embedded cluster.
@Suite(.serialized) struct EndToEndTests {
    /// The `event:` / `data:` pairs of an SSE body.
    static func sseEvents(_ text: String) -> [(event: String, data: String)] {
        text.components(separatedBy: "\n\n").compactMap { block in
            var event = ""
            var data = ""
            for line in block.split(separator: "\n") {
                if line.hasPrefix("event: ") { event = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
            }
            return event.isEmpty ? nil : (event, data)
        }
    }

    static func deliveries(_ call: [String: Any]) -> [[String: Any]] { call["deliveries"] as? [[String: Any]] ?? [] }

    @Test func ringIsSentAndTheSentStateIsVisibleViaGETAndSSE() async throws {
        // The stream must outlive a worker's start (group join, dedupe rebuild) on a busy CI machine.
        try await DispatchTestbed.with(configure: { $0.eventStreamLimit = .seconds(60) }) { bed in
            let worker = try await bed.startWorker()
            let callId = CallID.make()
            let token = hexToken(0x5e47)
            let accepted = try await bed.post("/v1/calls", json(ringBody(callId: callId, tokens: [token])))
            #expect(accepted.status == 202)
            let stream = try await bed.get("/v1/calls/\(callId)/events", timeout: .seconds(70))
            #expect(stream.status == 200)
            #expect(stream.contentType == "text/event-stream")
            let events = Self.sseEvents(stream.text)
            let statuses = try events.filter { $0.event == "status" }.map { try CallStatus.decode(Data($0.data.utf8)) }
            #expect(statuses.last?.state == .sent)
            #expect(statuses.allSatisfy { $0.callId == callId })
            #expect(events.last?.event == "end")
            #expect(events.last?.data == "{\"complete\":true}")

            let call = try await bed.waitForCall(callId) { $0["complete"] as? Bool == true }
            let delivery = try #require(Self.deliveries(call).first)
            #expect(delivery["state"] as? String == "sent")
            #expect(delivery["deviceKey"] as? String == DeviceKey.make(token: token))
            #expect((delivery["apns"] as? [String: Any])?["status"] as? Int == 200)
            #expect(worker.simulator.pushes().filter { $0.deviceToken == token }.count == 1)
            await bed.stop(worker)
        }
    }

    @Test func cancelBeforeThePushWentOutEndsCancelledWithoutAPush() async throws {
        try await DispatchTestbed.with { bed in
            let worker = try await bed.startWorker()
            var faults = APNSSimulatorFaults()
            faults.errorRate = ErrorInjection(status: 503, probability: 1)
            worker.simulator.setFaults(faults)
            let callId = CallID.make()
            let token = hexToken(0xca1)
            #expect(try await bed.post("/v1/calls", json(ringBody(callId: callId, tokens: [token], ringTimeoutSeconds: 30))).status == 202)
            _ = try await bed.waitForCall(callId) { Self.deliveries($0).first?["state"] as? String == "retrying" }
            let cancelled = try await bed.delete("/v1/calls/\(callId)")
            #expect(cancelled.status == 202)
            #expect(cancelled.json["callId"] as? String == callId)
            let call = try await bed.waitForCall(callId) { $0["complete"] as? Bool == true }
            #expect(Self.deliveries(call).first?["state"] as? String == "cancelled")
            worker.simulator.setFaults(APNSSimulatorFaults())
            try await Task.sleep(for: .milliseconds(500))
            #expect(worker.simulator.pushes().filter { $0.deviceToken == token }.isEmpty, "no push for the cancelled call")
            await bed.stop(worker)
        }
    }

    @Test func ackSuppressedFromTheDeviceIsVisibleWithTheCallKitErrorAndAWrongTokenIsRefused() async throws {
        try await DispatchTestbed.with { bed in
            let worker = try await bed.startWorker()
            let callId = CallID.make()
            let token = hexToken(0xac4)
            #expect(try await bed.post("/v1/calls", json(ringBody(callId: callId, tokens: [token]))).status == 202)
            _ = try await bed.waitForCall(callId) { $0["complete"] as? Bool == true }
            let push = try #require(worker.simulator.pushes().first { $0.deviceToken == token })
            let payload = try VoIPPayload.decode(Data(push.payload.utf8))

            let forged = try await bed.post("/v1/calls/\(callId)/ack", json([
                "deviceKey": payload.deviceKey, "ackToken": String(payload.ackToken.reversed()), "outcome": "reported",
            ]), headers: [:])
            #expect(forged.status == 403)

            let ack = try await bed.post("/v1/calls/\(callId)/ack", json([
                "deviceKey": payload.deviceKey, "ackToken": payload.ackToken, "outcome": "suppressed",
                "error": ["code": "filteredByDoNotDisturb", "domain": "com.apple.CallKit.error.incomingcall"],
            ]), headers: [:])
            #expect(ack.status == 202, "\(ack.text)")
            let call = try await bed.waitForCall(callId) { (Self.deliveries($0).first?["deviceReport"] as? [String: Any])?["outcome"] as? String == "suppressed" }
            #expect(Self.deliveries(call).first?["state"] as? String == "sent", "the device's report does not replace the worker's state")
            let error = (Self.deliveries(call).first?["deviceReport"] as? [String: Any])?["error"] as? [String: Any]
            #expect(error?["code"] as? String == "filteredByDoNotDisturb")
            #expect(error?["domain"] as? String == "com.apple.CallKit.error.incomingcall")

            let statuses = try await bed.readAll(bed.topics.status, partitions: 3, count: 10, seconds: 4)
                .filter { $0.keyString == callId }
            #expect(Set(statuses.map(\.partition)).count == 1, "the device report is on the call's partition")
            #expect(try statuses.map { try CallStatus.decode(Data($0.value)).state }.filter { $0 != .retrying } == [.sent, .suppressed])
            await bed.stop(worker)
        }
    }
}
