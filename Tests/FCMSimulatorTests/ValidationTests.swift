import FCMSimulator
import Foundation
import Testing

@Suite("FCM simulator: messages:send checks like FCM")
struct ValidationTests {
    @Test("a valid data message is accepted, named like FCM's and recorded (HTTP/2)")
    func accepted() async throws {
        try await SimulatorHarness.with { harness in
            let token = try await harness.accessToken()
            let answer = try await harness.send(SimulatorHarness.message(), accessToken: token)
            #expect(answer.status == 200, "\(answer.body)")
            let name = try #require(answer.json["name"] as? String)
            #expect(name.hasPrefix("projects/sim-test/messages/0:"))
            let recorded = try #require(harness.simulator.messages().first)
            #expect(recorded.name == name)
            #expect(recorded.data == ["callId": "c1"])
            #expect(recorded.android?.priority == "HIGH")
            #expect(recorded.android?.ttl == "30s")
            #expect(recorded.android?.collapseKey == "c1")
            #expect(recorded.android?.directBootOk == true)
            #expect(recorded.httpVersion == "HTTP/2")
        }
    }

    @Test("HTTP/1.1 clients (Google's Python client speaks it) are served too")
    func http1() async throws {
        try await SimulatorHarness.with(http1: true) { harness in
            let token = try await harness.accessToken()
            let answer = try await harness.send(
                SimulatorHarness.message(android: #"{"priority":"high","ttl":"3.5s","collapseKey":"c1","directBootOk":true}"#), accessToken: token)
            #expect(answer.status == 200, "\(answer.body)")
            #expect(harness.simulator.messages().first?.httpVersion == "HTTP/1.1")
            #expect(harness.simulator.messages().first?.android?.collapseKey == "c1")
        }
    }

    @Test("missing, unknown and expired bearer tokens get 401 UNAUTHENTICATED")
    func unauthenticated() async throws {
        // 5 s tokens: long enough for a loaded machine to use one before it expires.
        try await SimulatorHarness.with(faults: .init(accessTokenLifetimeSeconds: 5)) { harness in
            for credential in [nil, "ya29.nonsense"] {
                let answer = try await harness.send(SimulatorHarness.message(), accessToken: credential)
                #expect(answer.status == 401)
                #expect(answer.error["status"] as? String == "UNAUTHENTICATED")
                #expect(answer.fcmCode == nil)
            }
            let token = try await harness.accessToken()
            #expect(try await harness.send(SimulatorHarness.message(), accessToken: token).status == 200)
            try await Task.sleep(for: .milliseconds(5_100))
            #expect(try await harness.send(SimulatorHarness.message(), accessToken: token).status == 401)
            #expect(harness.simulator.messages().count == 1)
        }
    }

    @Test("a token for another project gets 403 PERMISSION_DENIED")
    func otherProject() async throws {
        try await SimulatorHarness.with { harness in
            let answer = try await harness.send(SimulatorHarness.message(), project: "someone-else", accessToken: try await harness.accessToken())
            #expect(answer.status == 403)
            #expect(answer.error["status"] as? String == "PERMISSION_DENIED")
        }
    }

    @Test("malformed messages get FCM's INVALID_ARGUMENT, naming the field", arguments: [
        (SimulatorHarness.message(token: "not a token"), "message.token", true),
        (SimulatorHarness.message(data: #"{"n":1}"#), "message.data[0].value", false),
        (SimulatorHarness.message(data: #"{"from":"x"}"#), "message.data", true),
        (SimulatorHarness.message(data: #"{"blob":"\#(String(repeating: "x", count: 4093))"}"#), "message", true),
        (SimulatorHarness.message(android: #"{"priority":"URGENT"}"#), "message.android.priority", false),
        (SimulatorHarness.message(android: #"{"ttl":"-1s"}"#), "message.android.ttl", false),
        (SimulatorHarness.message(android: #"{"ttl":"30"}"#), "message.android.ttl", false),
        (SimulatorHarness.message(android: #"{"ttl":"9999999s"}"#), "message.android.ttl", true),
        (SimulatorHarness.message(android: #"{"direct_boot_ok":"yes"}"#), "message.android.direct_boot_ok", false),
        (SimulatorHarness.message(android: #"{"sound":"ring"}"#), "message.android", false),
        (#"{"message":{"data":{"a":"b"}}}"#, "message", true),
        (#"{"message":{"token":"a","topic":"b"}}"#, "message", true),
        (#"{"message":{"token":"a","extra":1}}"#, "message", false),
        ("not json", "", false),
    ])
    func invalid(_ body: String, _ field: String, _ hasFcmError: Bool) async throws {
        try await SimulatorHarness.with { harness in
            let answer = try await harness.send(body, accessToken: try await harness.accessToken())
            #expect(answer.status == 400, "\(answer.body)")
            #expect(answer.error["status"] as? String == "INVALID_ARGUMENT")
            #expect(answer.error["code"] as? Int == 400)
            #expect(answer.violatedFields == [field], "\(answer.body)")
            #expect((answer.fcmCode == "INVALID_ARGUMENT") == hasFcmError, "\(answer.body)")
            #expect(harness.simulator.messages().isEmpty)
        }
    }

    @Test("validate_only answers like FCM and records nothing")
    func validateOnly() async throws {
        try await SimulatorHarness.with { harness in
            let body = #"{"validate_only":true,"message":{"token":"\#(SimulatorHarness.token)","data":{"a":"b"}}}"#
            let answer = try await harness.send(body, accessToken: try await harness.accessToken())
            #expect(answer.status == 200)
            #expect(answer.json["name"] as? String == "projects/sim-test/messages/fake_message_id")
            #expect(harness.simulator.messages().isEmpty)
        }
    }

    @Test("bodies over the bound are refused, not read")
    func bodyBound() async throws {
        try await SimulatorHarness.with(configure: { $0.maxBodyBytes = 8 * 1024 }) { harness in
            let big = SimulatorHarness.message(data: #"{"a":"\#(String(repeating: "x", count: 20_000))"}"#)
            let answer = try await harness.send(big, accessToken: try await harness.accessToken())
            #expect(answer.status == 400)
            #expect((answer.error["message"] as? String)?.contains("exceeds the limit") == true)
        }
    }

    @Test("stop() ends open HTTP/2 connections (GOAWAY) and returns")
    func stopWithOpenConnection() async throws {
        try await SimulatorHarness.with { harness in
            let token = try await harness.accessToken()
            let first = try await harness.send(SimulatorHarness.message(), accessToken: token)
            #expect(first.status == 200)
            let start = ContinuousClock.now
            await harness.simulator.stop()
            // The client keeps its connection open (AsyncHTTPClient closes an idle one after 60 s): stop()
            // must end it itself (GOAWAY, then close), not wait for it. The bound is far from both.
            #expect(ContinuousClock.now - start < .seconds(30), "stop() took \(ContinuousClock.now - start)")
        }
    }

    @Test("unknown paths answer FCM's 404 JSON")
    func unknownPath() async throws {
        try await SimulatorHarness.with { harness in
            let answer = try await harness.request(.GET, harness.simulator.baseURL + "/v1/whatever")
            #expect(answer.status == 404)
            #expect(answer.error["status"] as? String == "NOT_FOUND")
        }
    }
}
