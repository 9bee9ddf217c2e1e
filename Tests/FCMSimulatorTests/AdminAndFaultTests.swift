import FCMSimulator
import Foundation
import Testing

@Suite("FCM simulator: fault injection and the admin API")
struct AdminAndFaultTests {
    @Test("per-token outcomes and error bursts answer FCM's error JSON, with Retry-After on 429")
    func injected() async throws {
        let dead = "ZGVhZA:APA91bDeadDeadDeadDead"
        let faults = FCMSimulatorFaults(
            tokenOutcomes: [dead: .unregistered],
            errorRate: FCMErrorInjection(error: .quotaExceeded(retryAfterSeconds: 7), count: 1))
        try await SimulatorHarness.with(faults: faults) { harness in
            let token = try await harness.accessToken()
            let unregistered = try await harness.send(SimulatorHarness.message(token: dead), accessToken: token)
            #expect(unregistered.status == 404)
            #expect(unregistered.fcmCode == "UNREGISTERED")
            #expect(unregistered.error["status"] as? String == "NOT_FOUND")
            let quota = try await harness.send(SimulatorHarness.message(), accessToken: token)
            #expect(quota.status == 429)
            #expect(quota.fcmCode == "QUOTA_EXCEEDED")
            #expect(quota.headers["retry-after"] == "7")
            #expect(try await harness.send(SimulatorHarness.message(), accessToken: token).status == 200)
            let stats = harness.simulator.stats()
            #expect(stats.rejected == ["UNREGISTERED": 1, "QUOTA_EXCEEDED": 1])
            #expect(stats.accepted == 1)
        }
    }

    @Test("admin API: list and filter messages, clear them, read and replace faults, stats, CA, service account, revoke tokens")
    func admin() async throws {
        try await SimulatorHarness.with { harness in
            let admin = "http://127.0.0.1:\(try #require(harness.simulator.adminPort))/admin"
            let token = try await harness.accessToken()
            let other = "b3RoZXI:APA91bOther"
            #expect(try await harness.send(SimulatorHarness.message(), accessToken: token).status == 200)
            #expect(try await harness.send(SimulatorHarness.message(token: other), accessToken: token).status == 200)

            let all = try await harness.request(.GET, admin + "/messages")
            #expect(all.status == 200)
            #expect(((try JSONSerialization.jsonObject(with: Data(all.body.utf8))) as? [Any])?.count == 2)
            let filtered = try await harness.request(.GET, admin + "/messages?token=\(other)")
            let list = try #require((try JSONSerialization.jsonObject(with: Data(filtered.body.utf8))) as? [[String: Any]])
            #expect(list.count == 1)
            #expect(list.first?["token"] as? String == other)
            #expect((list.first?["receivedAt"] as? String)?.contains("T") == true)
            #expect(try await harness.request(.GET, admin + "/messages?since=yesterday").status == 400)

            let put = try await harness.request(.PUT, admin + "/faults", body: #"{"errorRate":{"error":{"errorCode":"UNAVAILABLE"},"probability":1}}"#)
            #expect(put.status == 200, "\(put.body)")
            #expect(harness.simulator.faults.errorRate?.error.status == 503)
            #expect(try await harness.send(SimulatorHarness.message(), accessToken: token).status == 503)
            let bad = try await harness.request(.PUT, admin + "/faults", body: #"{"errorRate":{"error":{"errorCode":"X"},"probability":2}}"#)
            #expect(bad.status == 400)
            #expect(bad.body.contains("probability"))
            #expect(try await harness.request(.PUT, admin + "/faults", body: "{}").status == 200)
            #expect(harness.simulator.faults == FCMSimulatorFaults())

            let stats = try await harness.request(.GET, admin + "/stats")
            #expect(stats.json["accepted"] as? Int == 2)
            #expect(stats.json["tokenRequests"] as? Int == 1)
            #expect(try await harness.request(.GET, admin + "/ca").body.contains("BEGIN CERTIFICATE"))
            let account = try await harness.request(.GET, admin + "/service-account")
            #expect(account.json["token_uri"] as? String == harness.simulator.tokenURI)
            #expect(account.json["project_id"] as? String == "sim-test")

            #expect(try await harness.request(.DELETE, admin + "/access-tokens").status == 204)
            #expect(try await harness.send(SimulatorHarness.message(), accessToken: token).status == 401)
            #expect(try await harness.request(.DELETE, admin + "/messages").status == 204)
            #expect(harness.simulator.messages().isEmpty)
        }
    }

    @Test("the record is bounded: the oldest messages are dropped and counted")
    func boundedRecord() async throws {
        try await SimulatorHarness.with(configure: { $0.maxRecordedMessages = 3 }) { harness in
            let token = try await harness.accessToken()
            for index in 0..<5 {
                _ = try await harness.send(SimulatorHarness.message(data: #"{"i":"\#(index)"}"#), accessToken: token)
            }
            #expect(harness.simulator.messages().map { $0.data["i"] } == ["2", "3", "4"])
            #expect(harness.simulator.stats().recordsDropped == 2)
        }
    }

    @Test("invalid fault values are refused naming the field")
    func faultValidation() {
        #expect(throws: FCMSimulatorError.self) { try FCMSimulatorFaults(latency: FCMLatency(minimumMilliseconds: 5, maximumMilliseconds: 1)).validate() }
        #expect(throws: FCMSimulatorError.self) { try FCMSimulatorFaults(accessTokenLifetimeSeconds: 0).validate() }
        #expect(throws: FCMSimulatorError.self) { try FCMSimulatorFaults(tokenEndpoint: FCMTokenEndpointFault(status: 200)).validate() }
        #expect(throws: FCMSimulatorError.self) {
            try FCMSimulatorFaults(tokenOutcomes: ["t": FCMSimulatedError(errorCode: "UNREGISTERED", status: 99)]).validate()
        }
    }
}
