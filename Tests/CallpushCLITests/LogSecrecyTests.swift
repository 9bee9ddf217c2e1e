import APNsSimulator
import CallContract
import FCMSimulator
import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Locking
import Testing
import CallpushTestSupport
@testable import CallpushCLI

@Suite(.serialized) struct LogSecrecy {
    @Test func aFullRunLogsNoDeviceTokenJWTKeyMaterialAckTokenOrAPIKey() async throws {
        let logs = CapturedLogs()
        let stack = try await DevStack.start(.init(brokers: 3, partitions: 2, workers: 2, dispatchPort: 0), logger: logs.logger("callpush"))
        let group = ServiceGroup(services: stack.services, logger: logs.logger("group"))
        let running = Task { try await group.run() }
        let state = try await stack.ready()
        let http = HTTPExchange(baseURL: try #require(URL(string: state.dispatchURL)), timeout: .seconds(10), caFile: nil)
        let auth = [("Authorization", "Bearer \(state.apiKey)"), ("Content-Type", "application/json")]

        let good = String(repeating: "a1", count: 32)
        let dead = String(repeating: "d2", count: 32)
        var faults = APNSSimulatorFaults()
        faults.tokenOutcomes[dead] = .unregistered()
        stack.simulator.setFaults(faults)
        var callIds: [String] = []
        for token in [good, dead] {
            let body = #"{"app":"\#(state.app)","devices":[{"token":"\#(token)","environment":"sandbox"}],"caller":{"handle":"driver-1"}}"#
            let answer = try await http.send(.POST, "/v1/calls", headers: auth, body: Array(body.utf8))
            #expect(answer.status == 202)
            if let id = (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["callId"] as? String { callIds.append(id) }
        }
        // Android phones through the FCM simulator: one rings, one token is dead (UNREGISTERED).
        let androidGood = "aG00d:APA91b" + String(repeating: "Qw3_Er-Ty", count: 15)
        let androidDead = "aDeAd:APA91b" + String(repeating: "Zx9-Cv_Bn", count: 15)
        var fcmFaults = FCMSimulatorFaults()
        fcmFaults.tokenOutcomes[androidDead] = .unregistered
        stack.fcmSimulator.setFaults(fcmFaults)
        for token in [androidGood, androidDead] {
            let body = #"{"app":"\#(state.app)","devices":[{"platform":"android","token":"\#(token)"}],"caller":{"handle":"driver-1"}}"#
            let answer = try await http.send(.POST, "/v1/calls", headers: auth, body: Array(body.utf8))
            #expect(answer.status == 202)
        }
        // Refused requests: a wrong API key, a bad token.
        let wrongKey = "cpdev_wrong_" + String(repeating: "9", count: 40)
        let refused = try await http.send(.POST, "/v1/calls", headers: [("Authorization", "Bearer \(wrongKey)"), ("Content-Type", "application/json")],
                                          body: Array(#"{"app":"x"}"#.utf8))
        #expect(refused.status == 401)
        let badToken = "zz" + String(repeating: "b3", count: 31)
        _ = try await http.send(.POST, "/v1/calls", headers: auth,
                                body: Array(#"{"app":"\#(state.app)","devices":[{"token":"\#(badToken)","environment":"sandbox"}],"caller":{"handle":"d"}}"#.utf8))
        // An invalid event straight to Kafka (the worker rejects and dead-letters it).
        let invalidToken = String(repeating: "c4", count: 31) + "zz"
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: [state.bootstrapServers], clientID: "secrecy-test")), logger: logs.logger("test-producer"))
        let invalid = #"{"type":"ring","callId":"\#(CallID.make())","app":"\#(state.app)","device":{"token":"\#(invalidToken)","environment":"sandbox"},"caller":{"handle":"d"},"requestedAt":"2026-01-01T00:00:00Z","ringDeadline":"2099-01-01T00:00:00Z"}"#
        _ = try await producer.send(KafkaProducerRecord(topic: Topics.requests, key: Array("k".utf8), value: Array(invalid.utf8)))
        await producer.shutdown()

        // The good call is sent; its device acks with the token from its VoIP payload.
        let deadline = ContinuousClock.now + .seconds(30)
        while stack.simulator.pushes().filter({ $0.deviceToken == good }).isEmpty && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let push = try #require(stack.simulator.pushes().first { $0.deviceToken == good })
        let payload = try VoIPPayload.decode(Data(push.payload.utf8))
        let ack = #"{"deviceKey":"\#(payload.deviceKey)","ackToken":"\#(payload.ackToken)","outcome":"suppressed","error":{"code":"filteredByDoNotDisturb","domain":"com.apple.CallKit.error.incomingcall"}}"#
        let acked = try await http.send(.POST, "/v1/calls/\(payload.callId)/ack", headers: [("Content-Type", "application/json")], body: Array(ack.utf8))
        #expect(acked.status == 202)
        let forged = ack.replacingOccurrences(of: payload.ackToken, with: String(payload.ackToken.reversed()))
        let refusedAck = try await http.send(.POST, "/v1/calls/\(payload.callId)/ack", headers: [("Content-Type", "application/json")], body: Array(forged.utf8))
        #expect(refusedAck.status == 403 || refusedAck.status == 401)
        try await Task.sleep(for: .seconds(1))

        await group.triggerGracefulShutdown()
        _ = await running.result

        let text = logs.text.lowercased()
        // The capture saw the records that concern the tokens: the push, the dead token, the rejected event.
        for line in ["push sent", "push failed", "event rejected"] {
            #expect(text.contains(line), "the capture has the worker's \"\(line)\" record (\(logs.count) records)")
        }
        while !stack.fcmSimulator.messages().contains(where: { $0.token == androidGood }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(stack.fcmSimulator.messages().contains { $0.token == androidGood }, "the Android phone rang")
        for (what, secret) in [("device token", good), ("dead device token", dead), ("Android token", androidGood),
                               ("dead Android token", androidDead), ("refused token", badToken),
                               ("invalid event's token", invalidToken), ("API key", state.apiKey), ("wrong API key", wrongKey),
                               ("ack token", payload.ackToken)] {
            #expect(!text.contains(secret.lowercased()), "the logs contain the \(what)")
        }
        #expect(text.range(of: #"eyj[a-z0-9_-]{10,}\.eyj"#, options: .regularExpression) == nil, "the logs contain a JWT")
        #expect(!text.contains("private key"), "the logs contain key material")
        #expect(!text.contains(String(repeating: "a1", count: 8)), "not even a long prefix of a token")
    }
}
