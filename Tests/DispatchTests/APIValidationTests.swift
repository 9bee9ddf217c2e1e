import CallContract
import CallpushCore
import CallpushTestSupport
import Foundation
import Testing
@testable import DispatchService

/// Bad input through the real HTTP server: each case gets problem+json with its status and the
/// failing field, and nothing is published.
@Suite struct APIValidationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var body: @Sendable () -> Data
        var status: Int
        var code: String
        var field: String?
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "malformed JSON", body: { Data("{\"app\": ".utf8) }, status: 400, code: "malformed-json", field: nil),
        Case(name: "missing app", body: { var b = ringBody(); b["app"] = nil; return json(b) }, status: 400, code: "missing-field", field: "app"),
        Case(name: "missing devices", body: { var b = ringBody(); b["devices"] = nil; return json(b) }, status: 400, code: "missing-field", field: "devices"),
        Case(name: "missing caller handle", body: { var b = ringBody(); b["caller"] = ["displayName": "x"]; return json(b) },
             status: 400, code: "missing-field", field: "caller.handle"),
        Case(name: "wrong-typed hasVideo", body: { var b = ringBody(); b["hasVideo"] = "yes"; return json(b) }, status: 400, code: "wrong-type", field: "hasVideo"),
        Case(name: "wrong-typed devices", body: { var b = ringBody(); b["devices"] = "abc"; return json(b) }, status: 400, code: "wrong-type", field: "devices"),
        Case(name: "wrong-typed ring timeout", body: { var b = ringBody(); b["ringTimeoutSeconds"] = "30"; return json(b) },
             status: 400, code: "wrong-type", field: "ringTimeoutSeconds"),
        Case(name: "token not hex", body: { json(ringBody(tokens: [hexToken(1), String(repeating: "zz", count: 32)])) },
             status: 400, code: "invalid-value", field: "devices[1].token"),
        Case(name: "token wrong length", body: { json(ringBody(tokens: [String(repeating: "ab", count: 10)])) },
             status: 400, code: "invalid-value", field: "devices[0].token"),
        Case(name: "unknown app", body: { json(ringBody(app: "taxi")) }, status: 400, code: "unknown-app", field: "app"),
        Case(name: "unknown environment", body: {
            var b = ringBody(); b["devices"] = [["token": hexToken(2), "environment": "staging"]]; return json(b)
        }, status: 400, code: "invalid-value", field: "devices[0].environment"),
        Case(name: "ring timeout too short", body: { json(ringBody(ringTimeoutSeconds: 0)) }, status: 400, code: "invalid-value", field: "ringTimeoutSeconds"),
        Case(name: "ring timeout too long", body: { json(ringBody(ringTimeoutSeconds: 121)) }, status: 400, code: "invalid-value", field: "ringTimeoutSeconds"),
        Case(name: "payload over 5120 bytes", body: {
            json(ringBody(attributes: Dictionary(uniqueKeysWithValues: (0..<6).map { ("k\($0)", String(repeating: "v", count: 1000)) })))
        }, status: 400, code: "payload-too-large", field: "attributes"),
        Case(name: "too many devices", body: { json(ringBody(tokens: (0..<11).map { hexToken(100 + $0) })) },
             status: 400, code: "too-many-devices", field: "devices"),
        Case(name: "callId not a UUID", body: { json(ringBody(callId: "call-1")) }, status: 400, code: "invalid-value", field: "callId"),
        Case(name: "app name with a space", body: { json(ringBody(app: "rider app")) }, status: 400, code: "invalid-value", field: "app"),
        Case(name: "empty app name", body: { json(ringBody(app: "")) }, status: 400, code: "invalid-value", field: "app"),
        Case(name: "max duration out of range", body: { var b = ringBody(); b["maxDurationSeconds"] = 0; return json(b) },
             status: 400, code: "invalid-value", field: "maxDurationSeconds"),
        Case(name: "too many attributes", body: {
            json(ringBody(attributes: Dictionary(uniqueKeysWithValues: (0..<33).map { ("k\($0)", "v") })))
        }, status: 400, code: "invalid-value", field: "attributes"),
        Case(name: "attribute value too long", body: { json(ringBody(attributes: ["room": String(repeating: "v", count: 1025)])) },
             status: 400, code: "invalid-value", field: "attributes.room"),
        Case(name: "empty attribute key", body: { json(ringBody(attributes: ["": "v"])) }, status: 400, code: "invalid-value", field: "attributes"),
        Case(name: "caller name with a right-to-left override", body: {
            var b = ringBody(); b["caller"] = ["handle": "driver-1", "displayName": "Driver \u{202E}kanaT"]; return json(b)
        }, status: 400, code: "invalid-value", field: "caller.displayName"),
        Case(name: "caller handle with a zero-width space", body: {
            var b = ringBody(); b["caller"] = ["handle": "driver\u{200B}1"]; return json(b)
        }, status: 400, code: "invalid-value", field: "caller.handle"),
        Case(name: "attribute with a control character", body: { json(ringBody(attributes: ["room": "a\u{0007}b"])) },
             status: 400, code: "invalid-value", field: "attributes.room"),
        Case(name: "body too large", body: { json(ringBody(attributes: ["big": String(repeating: "x", count: 20_000)])) },
             status: 413, code: "body-too-large", field: nil),
        Case(name: "android device with an environment", body: {
            var b = ringBody(); b["devices"] = [["platform": "android", "token": androidToken(1), "environment": "production"]]; return json(b)
        }, status: 400, code: "invalid-value", field: "devices[0].environment"),
        Case(name: "android token with a slash", body: {
            var b = ringBody(); b["devices"] = [["token": hexToken(1), "environment": "sandbox"], ["platform": "android", "token": "abc/def"]]; return json(b)
        }, status: 400, code: "invalid-value", field: "devices[1].token"),
        Case(name: "unknown platform", body: {
            var b = ringBody(); b["devices"] = [["platform": "web", "token": androidToken(1)]]; return json(b)
        }, status: 400, code: "invalid-value", field: "devices[0].platform"),
        Case(name: "FCM data over 4096 bytes", body: {
            var b = ringBody(attributes: Dictionary(uniqueKeysWithValues: (0..<4).map { ("k\($0)", String(repeating: "v", count: 1000)) }))
            b["devices"] = [["platform": "android", "token": androidToken(1)]]
            return json(b)
        }, status: 400, code: "payload-too-large", field: "attributes"),
    ]

    @Test(arguments: cases)
    func badRingIsRefusedWithItsStatusAndFieldAndNothingIsPublished(_ testCase: Case) async throws {
        try await APIHarness.with { h in
            let answer = try await h.post("/v1/calls", testCase.body())
            #expect(answer.status == testCase.status, "\(answer.text)")
            #expect(answer.contentType == "application/problem+json")
            let problem = answer.json
            #expect(problem["type"] as? String == "https://callpush.dev/problems/\(testCase.code)")
            #expect(problem["status"] as? Int == testCase.status)
            #expect(problem["field"] as? String == testCase.field)
            #expect((problem["detail"] as? String)?.isEmpty == false)
            #expect(h.publisher.count == 0, "nothing is published for a rejected request")
        }
    }

    /// One call to an iPhone and an Android phone: one event each, the Android one with its
    /// platform and verbatim token and no environment, and a 202 that says which is which.
    @Test func aCallToAnIPhoneAndAnAndroidPhoneIsAcceptedAsOneEventEach() async throws {
        try await APIHarness.with { h in
            var body = ringBody(attributes: Dictionary(uniqueKeysWithValues: (0..<4).map { ("k\($0)", String(repeating: "v", count: 700)) }))
            body["devices"] = [["token": hexToken(1), "environment": "sandbox", "id": "iphone"],
                               ["platform": "android", "token": androidToken(2), "id": "pixel"]]
            let answer = try await h.post("/v1/calls", json(body))
            #expect(answer.status == 202, "\(answer.text)")
            let deliveries = answer.json["deliveries"] as? [[String: Any]] ?? []
            #expect(deliveries.map { $0["environment"] as? String } == ["sandbox", nil])
            #expect(deliveries.map { $0["platform"] as? String } == [nil, "android"])
            let rings = h.publisher.records.withLock { $0 }.compactMap { record -> RingRequest? in
                guard case .ring(let ring)? = try? CallRequest.decode(record.value) else { return nil }
                return ring
            }
            #expect(rings.map(\.device.platform) == [.ios, .android])
            #expect(rings.last?.device.token == androidToken(2))
            #expect(rings.last?.device.environment == nil)
        }
    }

    @Test func missingOrBadAPIKeyIsRefused() async throws {
        try await APIHarness.with { h in
            let body = json(ringBody())
            let missing = try await h.post("/v1/calls", body, headers: ["Content-Type": "application/json"])
            #expect(missing.status == 401)
            #expect(missing.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
            let wrong = try await h.post("/v1/calls", body, headers: ["Authorization": "Bearer not-the-key"])
            #expect(wrong.status == 401)
            #expect(wrong.json["type"] as? String == "https://callpush.dev/problems/unauthorized")
            let basic = try await h.get("/v1/calls/\(CallID.make())", headers: ["Authorization": "Basic \(testKey)"])
            #expect(basic.status == 401)
            #expect(h.publisher.count == 0)
        }
    }

    @Test func rateLimitAnswers429WithRetryAfter() async throws {
        var configuration = testConfiguration()
        configuration.apiKeys = [APIKey(name: "slow", plaintext: testKey, ratePerSecond: 0.01, burst: 2)]
        try await APIHarness.with(configuration) { h in
            var statuses: [Int] = []
            var retryAfter: String?
            for _ in 0..<3 {
                let answer = try await h.post("/v1/calls", json(ringBody()))
                statuses.append(answer.status)
                if answer.status == 429 { retryAfter = answer.headers["retry-after"] }
            }
            #expect(statuses == [202, 202, 429])
            #expect(Int(retryAfter ?? "") ?? 0 >= 1)
            #expect(h.publisher.count == 2, "the limited request published nothing")
        }
    }

    @Test func unknownCallIs404() async throws {
        try await APIHarness.with { h in
            let answer = try await h.get("/v1/calls/\(CallID.make())")
            #expect(answer.status == 404)
            #expect(answer.json["type"] as? String == "https://callpush.dev/problems/not-found")
            let events = try await h.get("/v1/calls/\(CallID.make())/events")
            #expect(events.status == 404)
            let notUUID = try await h.get("/v1/calls/not-a-uuid")
            #expect(notUUID.status == 400)
            #expect(notUUID.json["field"] as? String == "callId")
        }
    }

    @Test func sameBodyAgainGetsTheSameAnswerAndADifferentBodyGets409() async throws {
        try await APIHarness.with { h in
            let callId = CallID.make()
            let first = try await h.post("/v1/calls", json(ringBody(callId: callId, tokens: [hexToken(1), hexToken(2)])))
            #expect(first.status == 202)
            let again = try await h.post("/v1/calls", json(ringBody(callId: callId, tokens: [hexToken(1), hexToken(2)])))
            #expect(again.status == 202)
            #expect(again.body == first.body, "the same answer, byte for byte")
            #expect(h.publisher.count == 2, "one event per device, published once")
            let conflicting = try await h.post("/v1/calls", json(ringBody(callId: callId, tokens: [hexToken(3)])))
            #expect(conflicting.status == 409)
            #expect(conflicting.json["field"] as? String == "callId")
            #expect(h.publisher.count == 2)
        }
    }

    @Test func unacknowledgedPublishIs503WithRetryAfterAndARetryWithTheSameIdSucceeds() async throws {
        try await APIHarness.with { h in
            let callId = CallID.make()
            h.publisher.failing.store(true, ordering: .relaxed)
            let refused = try await h.post("/v1/calls", json(ringBody(callId: callId)))
            #expect(refused.status == 503)
            #expect(refused.headers["retry-after"] == "1")
            h.publisher.failing.store(false, ordering: .relaxed)
            let retried = try await h.post("/v1/calls", json(ringBody(callId: callId)))
            #expect(retried.status == 202)
            #expect(retried.json["callId"] as? String == callId)
        }
    }

    @Test func ackWithAWrongTokenIsRefusedAndPublishesNothing() async throws {
        try await APIHarness.with { h in
            let callId = CallID.make()
            let deviceKey = DeviceKey.make(token: hexToken(7))
            let otherCall = try AckTokenSigner(secret: testSecret).token(callId: CallID.make(), deviceKey: deviceKey)
            for token in [otherCall, "garbage", String(repeating: "A", count: 43)] {
                let answer = try await h.post("/v1/calls/\(callId)/ack",
                                              json(["deviceKey": deviceKey, "ackToken": token, "outcome": "reported"]), headers: [:])
                #expect(answer.status == 403)
                #expect(answer.json["field"] as? String == "ackToken")
            }
            #expect(h.publisher.count == 0)
            let missingError = try await h.post("/v1/calls/\(callId)/ack", json([
                "deviceKey": deviceKey, "ackToken": try AckTokenSigner(secret: testSecret).token(callId: callId, deviceKey: deviceKey),
                "outcome": "suppressed",
            ]), headers: [:])
            #expect(missingError.status == 400)
            #expect(missingError.json["field"] as? String == "error")
        }
    }

    @Test func ackWithTheRightTokenPublishesTheDeviceReport() async throws {
        try await APIHarness.with { h in
            let callId = CallID.make()
            let deviceKey = DeviceKey.make(token: hexToken(8))
            let token = try AckTokenSigner(secret: testSecret).token(callId: callId, deviceKey: deviceKey, replay: 2,
                                                                     ringDeadline: Date().addingTimeInterval(30))
            let answer = try await h.post("/v1/calls/\(callId)/ack", json([
                "deviceKey": deviceKey, "ackToken": token, "outcome": "suppressed",
                "error": ["code": "filteredByDoNotDisturb", "domain": "com.apple.CallKit.error.incomingcall"],
            ]), headers: [:])
            #expect(answer.status == 202)
            let record = try #require(h.publisher.records.withLock { $0.first })
            #expect(record.topic == Topics.status)
            let status = try CallStatus.decode(Data(record.value))
            #expect(status.state == .suppressed)
            #expect(status.error?.code == "filteredByDoNotDisturb")
            #expect(status.worker == "dispatch-test")
            #expect(status.replay == 2, "the replay generation the token was issued for")
        }
    }

    @Test func openEventStreamEndsIncompleteWhenTheServerShutsDown() async throws {
        var configuration = testConfiguration()
        configuration.eventStreamLimit = .seconds(60)
        try await APIHarness.with(configuration) { h in
            let callId = CallID.make()
            #expect(try await h.post("/v1/calls", json(ringBody(callId: callId))).status == 202)
            let stream = Task { try await h.get("/v1/calls/\(callId)/events") }
            #expect(try await eventually(seconds: 15, every: .milliseconds(100)) { h.api.streams.openCount == 1 }, "the stream is open before the shutdown")
            await h.group.triggerGracefulShutdown()
            let answer = try await stream.value
            #expect(answer.status == 200)
            #expect(EndToEndTests.sseEvents(answer.text).last?.data == "{\"complete\":false}", "\(answer.text)")
        }
    }
}

/// One device cannot be rung without end, whatever keys or call ids are used (harassment).
@Suite struct DeviceRateLimitTests {
    @Test func ringsOfOneDeviceAreLimitedPerMinuteAcrossKeysAndCalls() async throws {
        var configuration = testConfiguration()
        configuration.ringsPerDevicePerMinute = 5
        configuration.apiKeys.append(APIKey(name: "second", plaintext: "cpk_second-key-0123456789", ratePerSecond: 1_000))
        // The minute does not pass during the test, however slowly the machine answers (a token
        // comes back every 12 s at 5 a minute).
        try await APIHarness.with(configuration, limiterClock: { 1_000 }) { h in
            var statuses: [Int] = []
            for index in 0..<8 {
                let headers = index % 2 == 0 ? testAuth : ["Authorization": "Bearer cpk_second-key-0123456789"]
                statuses.append(try await h.post("/v1/calls", json(ringBody(tokens: [hexToken(0x77)])), headers: headers).status)
            }
            #expect(statuses.prefix(5).allSatisfy { $0 == 202 })
            #expect(statuses.suffix(3).allSatisfy { $0 == 429 }, "\(statuses)")
            let refused = try await h.post("/v1/calls", json(ringBody(tokens: [hexToken(0x77)])))
            #expect(refused.json["type"] as? String == "https://callpush.dev/problems/device-rate-limited")
            #expect(refused.json["field"] as? String == "devices[0].token")
            #expect(refused.headers["retry-after"] != nil)
            #expect(h.publisher.count == 5, "nothing published for a refused ring")
            let repeated = CallID.make()
            let another = try await h.post("/v1/calls", json(ringBody(callId: repeated, tokens: [hexToken(0x78)])))
            #expect(another.status == 202, "another device is not limited")
        }
    }
}
