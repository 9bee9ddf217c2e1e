import CallContract
import CallpushCore
import CallpushTestSupport
import Foundation
import Testing
@testable import DispatchService

/// The ack route faces every phone on the internet: a captured ack cannot be replayed into
/// Kafka, its body and `error` are bounded, and floods are throttled.
@Suite struct AckAbuseTests {
    static let signer = try! AckTokenSigner(secret: testSecret)

    /// Rings one device through the API and returns (callId, deviceKey, the worker's v2 token).
    static func ring(_ h: APIHarness, token: String = hexToken(7)) async throws -> (String, String, String) {
        let callId = CallID.make()
        let accepted = try await h.post("/v1/calls", json(ringBody(callId: callId, tokens: [token])))
        #expect(accepted.status == 202)
        let deadline = try #require(ContractCoding.parseTimestamp(accepted.json["ringDeadline"] as? String ?? ""))
        let deviceKey = DeviceKey.make(token: token)
        return (callId, deviceKey, signer.token(callId: callId, deviceKey: deviceKey, replay: 0, ringDeadline: deadline))
    }

    static func ack(_ deviceKey: String, _ token: String, outcome: String = "reported", error: [String: String]? = nil) -> Data {
        var body: [String: Any] = ["deviceKey": deviceKey, "ackToken": token, "outcome": outcome]
        if let error { body["error"] = error }
        return json(body)
    }

    static func statuses(_ h: APIHarness) -> [CallStatus] {
        h.publisher.records.withLock { records in
            records.filter { $0.topic == Topics.status }.compactMap { try? CallStatus.decode(Data($0.value)) }
        }
    }

    @Test func tenThousandReplaysOfOneValidAckPublishOneStatus() async throws {
        var configuration = testConfiguration()
        configuration.limits.maxBodyBytes = 64 * 1024
        try await APIHarness.with(configuration) { h in
            let (callId, deviceKey, token) = try await Self.ring(h)
            let body = Self.ack(deviceKey, token)
            let first = try await h.post("/v1/calls/\(callId)/ack", body, headers: [:])
            #expect(first.status == 202)
            let answers = try await withThrowingTaskGroup(of: [Int: Int].self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        var counts: [Int: Int] = [:]
                        for _ in 0..<1_250 { counts[try await h.post("/v1/calls/\(callId)/ack", body, headers: [:]).status, default: 0] += 1 }
                        return counts
                    }
                }
                return try await group.reduce(into: [Int: Int]()) { $0.merge($1, uniquingKeysWith: +) }
            }
            #expect(answers.values.reduce(0, +) == 10_000)
            #expect(Set(answers.keys).isSubset(of: [202, 429]), "\(answers)")
            #expect(Self.statuses(h).count == 1, "one status for one (call, device, replay, outcome)")
        }
    }

    @Test func aRepeatedAckAnswersTheSameResultAndWritesNothing() async throws {
        try await APIHarness.with { h in
            let (callId, deviceKey, token) = try await Self.ring(h)
            let body = Self.ack(deviceKey, token, outcome: "suppressed", error: ["code": "filteredByDoNotDisturb"])
            let first = try await h.post("/v1/calls/\(callId)/ack", body, headers: [:])
            let again = try await h.post("/v1/calls/\(callId)/ack", body, headers: [:])
            #expect(first.status == 202)
            #expect(again.status == first.status)
            #expect(again.body == first.body)
            #expect(Self.statuses(h).count == 1)
            let reported = try await h.post("/v1/calls/\(callId)/ack", Self.ack(deviceKey, token), headers: [:])
            #expect(reported.status == 202, "another outcome is another report")
            #expect(Self.statuses(h).map(\.state) == [.suppressed, .reported])
        }
    }

    struct BadError: Sendable, CustomTestStringConvertible {
        var name: String
        var outcome = "suppressed"
        var error: [String: String]
        var field: String
        var testDescription: String { name }
    }

    static let badErrors: [BadError] = [
        BadError(name: "code of 65 bytes", error: ["code": String(repeating: "A", count: 65)], field: "error.code"),
        BadError(name: "code of 60,000 bytes", error: ["code": String(repeating: "A", count: 60_000)], field: "error.code"),
        BadError(name: "code with a bell", error: ["code": "x\u{07}y"], field: "error.code"),
        BadError(name: "code with RLO", error: ["code": "x\u{202E}y"], field: "error.code"),
        BadError(name: "empty code", error: ["code": ""], field: "error.code"),
        BadError(name: "domain with RLO", error: ["code": "callBlocked", "domain": "x\u{202E}y"], field: "error.domain"),
        BadError(name: "message of 1 KB", error: ["code": "callBlocked", "message": String(repeating: "m", count: 1_000)], field: "error.message"),
        BadError(name: "message with a zero-width space", error: ["code": "callBlocked", "message": "a\u{200B}b"], field: "error.message"),
        BadError(name: "message with a newline", error: ["code": "callBlocked", "message": "a\nb"], field: "error.message"),
    ]

    @Test(arguments: badErrors)
    func anUnboundedOrSpoofingErrorIsRefusedNamingTheField(_ bad: BadError) async throws {
        var configuration = testConfiguration()
        configuration.limits.maxBodyBytes = 64 * 1024
        try await APIHarness.with(configuration) { h in
            let (callId, deviceKey, token) = try await Self.ring(h)
            let answer = try await h.post("/v1/calls/\(callId)/ack", Self.ack(deviceKey, token, outcome: bad.outcome, error: bad.error), headers: [:])
            #expect(answer.status == 400 || (bad.error["code"]?.utf8.count ?? 0 > 2_000 && answer.status == 413), "\(answer.text)")
            if answer.status == 400 {
                #expect(answer.json["field"] as? String == bad.field)
            }
            #expect(Self.statuses(h).isEmpty)
        }
    }

    @Test func anAckBodyOverTwoKibibytesIs413() async throws {
        var configuration = testConfiguration()
        configuration.limits.maxBodyBytes = 64 * 1024
        try await APIHarness.with(configuration) { h in
            let (callId, deviceKey, token) = try await Self.ring(h)
            var body = ["deviceKey": deviceKey, "ackToken": token, "outcome": "reported"]
            body["padding"] = String(repeating: " ", count: 2_100)
            let answer = try await h.post("/v1/calls/\(callId)/ack", json(body), headers: [:])
            #expect(answer.status == 413)
            #expect(answer.contentType == "application/problem+json")
            #expect(Self.statuses(h).isEmpty)
        }
    }

    @Test func bogusAcksFromOneAddressAreThrottled() async throws {
        var configuration = testConfiguration()
        configuration.ackRatePerAddress = 5
        try await APIHarness.with(configuration) { h in
            var statuses: [Int] = []
            let callId = CallID.make()
            for _ in 0..<300 {
                statuses.append(try await h.post("/v1/calls/\(callId)/ack", Self.ack("k", "garbage"), headers: [:]).status)
            }
            #expect(statuses.contains(429), "\(Set(statuses))")
            #expect(Set(statuses).isSubset(of: [403, 429]))
        }
    }

    @Test func validAcksForOneCallAreThrottledPerCall() async throws {
        var configuration = testConfiguration()
        configuration.ackRatePerCall = 0.01  // one ack, then one more per 100 s: however slow the machine
        try await APIHarness.with(configuration) { h in
            let (callId, deviceKey, token) = try await Self.ring(h)
            var statuses: [Int] = []
            for outcome in ["reported", "suppressed", "reported", "suppressed", "reported"] {
                let error = outcome == "suppressed" ? ["code": "callBlocked"] : nil
                statuses.append(try await h.post("/v1/calls/\(callId)/ack", Self.ack(deviceKey, token, outcome: outcome, error: error), headers: [:]).status)
            }
            #expect(statuses.first == 202)
            #expect(statuses.contains(429), "\(statuses)")
            #expect(Self.statuses(h).count <= 2)
        }
    }

    @Test func anExpiredTokenIsRefused() async throws {
        try await APIHarness.with { h in
            let callId = CallID.make(), deviceKey = DeviceKey.make(token: hexToken(3))
            let expired = Self.signer.token(callId: callId, deviceKey: deviceKey, replay: 0, ringDeadline: Date().addingTimeInterval(-301))
            let answer = try await h.post("/v1/calls/\(callId)/ack", Self.ack(deviceKey, expired), headers: [:])
            #expect(answer.status == 403)
            #expect(answer.json["type"] as? String == "https://callpush.dev/problems/ack-expired")
            let graced = Self.signer.token(callId: callId, deviceKey: deviceKey, replay: 0, ringDeadline: Date().addingTimeInterval(-200))
            #expect(try await h.post("/v1/calls/\(callId)/ack", Self.ack(deviceKey, graced), headers: [:]).status == 202, "within the grace")
            #expect(Self.statuses(h).count == 1)
        }
    }

    @Test func aVersionOneTokenIsAcceptedOnlyWhileTheViewKnowsTheCallsDeadline() async throws {
        try await APIHarness.with { h in
            let unknownCall = CallID.make(), deviceKey = DeviceKey.make(token: hexToken(7))
            let legacy = Self.signer.token(callId: unknownCall, deviceKey: deviceKey)
            let refused = try await h.post("/v1/calls/\(unknownCall)/ack", Self.ack(deviceKey, legacy), headers: [:])
            #expect(refused.status == 403, "no deadline known: a token without expiry is not enough")
            let (callId, _, _) = try await Self.ring(h, token: hexToken(7))
            let accepted = try await h.post("/v1/calls/\(callId)/ack", Self.ack(deviceKey, Self.signer.token(callId: callId, deviceKey: deviceKey)), headers: [:])
            #expect(accepted.status == 202)
            #expect(Self.statuses(h).count == 1)
        }
    }

    @Test func aReplayGenerationIsAnotherReport() async throws {
        try await APIHarness.with { h in
            let (callId, deviceKey, token) = try await Self.ring(h)
            let deadline = Date().addingTimeInterval(60)
            let replayed = Self.signer.token(callId: callId, deviceKey: deviceKey, replay: 1, ringDeadline: deadline)
            #expect(try await h.post("/v1/calls/\(callId)/ack", Self.ack(deviceKey, token), headers: [:]).status == 202)
            #expect(try await h.post("/v1/calls/\(callId)/ack", Self.ack(deviceKey, replayed), headers: [:]).status == 202)
            #expect(try await h.post("/v1/calls/\(callId)/ack", Self.ack(deviceKey, replayed), headers: [:]).status == 202)
            #expect(Self.statuses(h).map(\.replay) == [0, 1], "one report per replay generation, bound by the token")
        }
    }

    @Test func theClientAddressBehindTrustedProxiesIsTheOutermostTrustedEntry() {
        #expect(DispatchAPI.clientAddress(peer: "10.0.0.1", forwardedFor: ["1.1.1.1, 2.2.2.2"], trustedProxyHops: 0) == "10.0.0.1",
                "no trusted proxy: X-Forwarded-For is the client's own claim")
        #expect(DispatchAPI.clientAddress(peer: "10.0.0.1", forwardedFor: ["6.6.6.6, 2.2.2.2"], trustedProxyHops: 1) == "2.2.2.2",
                "one proxy: the entry it appended; what the client sent before is ignored")
        #expect(DispatchAPI.clientAddress(peer: "10.0.0.1", forwardedFor: ["6.6.6.6", "3.3.3.3, 10.0.0.9"], trustedProxyHops: 2) == "3.3.3.3")
        #expect(DispatchAPI.clientAddress(peer: "10.0.0.1", forwardedFor: [], trustedProxyHops: 1) == "10.0.0.1")
    }
}
