import CallContract
import Foundation
import NIOHTTP1
import Testing
@testable import DispatchService

/// RFC 9457 / RFC 9110 answers where the router itself decides: unknown routes, wrong methods.
@Suite struct ProblemDetailsTests {
    @Test func aWrongMethodIs405WithAllowAndProblemJSON() async throws {
        try await APIHarness.with { h in
            let answer = try await TestHTTPClient.request(.PUT, port: h.port, path: "/v1/calls/\(CallID.make())", headers: testAuth, body: Data("{}".utf8))
            #expect(answer.status == 405)
            #expect(answer.headers["allow"].map { Set($0.components(separatedBy: ", ")) } == ["GET", "DELETE"])
            #expect(answer.contentType == "application/problem+json")
            #expect(answer.json["type"] as? String == "https://callpush.dev/problems/method-not-allowed")
            let list = try await h.get("/v1/calls")
            #expect(list.status == 405)
            #expect(list.headers["allow"] == "POST")
        }
    }

    @Test func anUnknownRouteIs404ProblemJSON() async throws {
        try await APIHarness.with { h in
            let answer = try await h.get("/v2/nothing-here")
            #expect(answer.status == 404)
            #expect(answer.contentType == "application/problem+json")
            #expect(answer.json["type"] as? String == "https://callpush.dev/problems/not-found")
        }
    }

    @Test func metricsAreNotServedOnTheAPIPort() async throws {
        try await APIHarness.with { h in
            let metrics = try await h.get("/metrics", headers: [:])
            #expect(metrics.status == 404)
        }
    }

    @Test func anAcceptedRingPointsAtItsStatus() async throws {
        try await APIHarness.with { h in
            let id = CallID.make()
            let answer = try await h.post("/v1/calls", json(ringBody(callId: id)))
            #expect(answer.status == 202)
            #expect(answer.headers["location"] == "/v1/calls/\(id)")
        }
    }
}
