import CallContract
import CallpushCore
import CallpushTestSupport
import Foundation
import Testing
@testable import DispatchService

/// Real responses of every documented operation are checked against docs/openapi.json.
@Suite struct OpenAPIConformanceTests {
    @Test func realResponsesConformToTheDocument() async throws {
        let document = try OpenAPIDocument.load()
        var configuration = testConfiguration()
        configuration.apiKeys = [APIKey(name: "test", plaintext: testKey, ratePerSecond: 1_000), APIKey(name: "slow", plaintext: "slow-key", ratePerSecond: 0.01, burst: 1)]
        try await APIHarness.with(configuration) { h in
            var checked: [(String, String, HTTPAnswer)] = []
            func record(_ method: String, _ path: String, _ answer: HTTPAnswer) { checked.append((method, path, answer)) }

            let callId = CallID.make()
            let token = hexToken(0x0a1)
            record("POST", "/v1/calls", try await h.post("/v1/calls", json(ringBody(callId: callId, tokens: [token]))))
            record("POST", "/v1/calls", try await h.post("/v1/calls", json(ringBody(callId: callId, tokens: [hexToken(5)]))))
            record("POST", "/v1/calls", try await h.post("/v1/calls", json(ringBody(tokens: ["zz"]))))
            record("POST", "/v1/calls", try await h.post("/v1/calls", json(ringBody()), headers: [:]))
            record("POST", "/v1/calls", try await h.post("/v1/calls", Data(repeating: 0x20, count: 20_000)))
            _ = try await h.post("/v1/calls", json(ringBody()), headers: ["Authorization": "Bearer slow-key"])
            record("POST", "/v1/calls", try await h.post("/v1/calls", json(ringBody()), headers: ["Authorization": "Bearer slow-key"]))
            h.publisher.failing.store(true, ordering: .relaxed)
            record("POST", "/v1/calls", try await h.post("/v1/calls", json(ringBody())))
            record("DELETE", "/v1/calls/{callId}", try await TestHTTPClient.request(.DELETE, port: h.port, path: "/v1/calls/\(callId)", headers: testAuth))
            h.publisher.failing.store(false, ordering: .relaxed)
            record("DELETE", "/v1/calls/{callId}", try await TestHTTPClient.request(.DELETE, port: h.port, path: "/v1/calls/\(callId)",
                                                                                      headers: testAuth, body: json(["reason": "rider cancelled"])))

            let deviceKey = DeviceKey.make(token: token)
            let ackToken = try AckTokenSigner(secret: testSecret).token(callId: callId, deviceKey: deviceKey)
            record("POST", "/v1/calls/{callId}/ack", try await h.post("/v1/calls/\(callId)/ack", json([
                "deviceKey": deviceKey, "ackToken": ackToken, "outcome": "suppressed", "error": ["code": "callBlocked", "domain": "com.apple.CallKit.error.incomingcall"],
            ]), headers: [:]))
            record("POST", "/v1/calls/{callId}/ack", try await h.post("/v1/calls/\(callId)/ack", json([
                "deviceKey": deviceKey, "ackToken": "nope", "outcome": "reported",
            ]), headers: [:]))
            h.api.view.apply(status: CallStatus(callId: callId, deviceKey: deviceKey, app: "rider", state: .sent, attempt: 1, at: Date(),
                                                apns: .init(id: "x", status: 200), worker: "w"), partition: 0)
            record("GET", "/v1/calls/{callId}", try await h.get("/v1/calls/\(callId)"))
            record("GET", "/v1/calls/{callId}", try await h.get("/v1/calls/\(CallID.make())"))
            record("GET", "/v1/calls/{callId}", try await h.get("/v1/calls/nope"))
            record("GET", "/v1/calls/{callId}/events", try await h.get("/v1/calls/\(callId)/events"))
            record("GET", "/healthz", try await h.get("/healthz", headers: [:]))
            record("GET", "/readyz", try await h.get("/readyz", headers: [:]))

            #expect(Set(checked.map(\.2.status)) == [200, 202, 400, 401, 403, 404, 409, 413, 429, 503], "every kind of answer was exercised")
            for (method, path, answer) in checked {
                let problems = document.check(method: method, path: path, answer: answer)
                #expect(problems.isEmpty, "\(method) \(path) \(answer.status): \(problems) — \(answer.text.prefix(300))")
            }
        }
    }
}
