import CallContract
import CallpushCore
import CallpushTestSupport
import Foundation
import Testing
@testable import DispatchService

/// Two backends on one deployment: neither can see, follow, cancel or learn of the other's calls.
@Suite struct TenantIsolationTests {
    static let keyA = "cpk_tenant-a-key-0123456789"
    static let keyB = "cpk_tenant-b-key-0123456789"
    static let authA = ["Authorization": "Bearer \(keyA)"]
    static let authB = ["Authorization": "Bearer \(keyB)"]

    static func twoTenants() -> DispatchConfiguration {
        var configuration = testConfiguration()
        configuration.apiKeys = [APIKey(name: "a", plaintext: keyA, ratePerSecond: 1_000), APIKey(name: "b", plaintext: keyB, ratePerSecond: 1_000)]
        return configuration
    }

    @Test func anotherTenantsCallIsIndistinguishableFromAnUnknownOne() async throws {
        try await APIHarness.with(Self.twoTenants()) { h in
            let id = CallID.make()
            #expect(try await h.post("/v1/calls", json(ringBody(callId: id)), headers: Self.authA).status == 202)
            #expect(try await h.get("/v1/calls/\(id)", headers: Self.authA).status == 200)
            let unknown = try await h.get("/v1/calls/\(CallID.make())", headers: Self.authB)
            let foreign = try await h.get("/v1/calls/\(id)", headers: Self.authB)
            #expect(foreign.status == 404)
            #expect(foreign.json["type"] as? String == unknown.json["type"] as? String)
            #expect(foreign.json["title"] as? String == unknown.json["title"] as? String)
            #expect(try await h.get("/v1/calls/\(id)/events", headers: Self.authB).status == 404)
            let published = h.publisher.count
            let cancel = try await TestHTTPClient.request(.DELETE, port: h.port, path: "/v1/calls/\(id)", headers: Self.authB)
            #expect(cancel.status == 404)
            #expect(h.publisher.count == published, "another tenant's DELETE publishes nothing")
        }
    }

    @Test func reusingAnotherTenantsCallIdRevealsNothing() async throws {
        try await APIHarness.with(Self.twoTenants()) { h in
            let id = CallID.make()
            #expect(try await h.post("/v1/calls", json(ringBody(callId: id, tokens: [hexToken(1)])), headers: Self.authA).status == 202)
            let other = try await h.post("/v1/calls", json(ringBody(callId: id, tokens: [hexToken(2)])), headers: Self.authB)
            #expect(other.status == 202, "idempotency is per tenant: no 409 oracle across tenants")
            let seenByA = try await h.get("/v1/calls/\(id)", headers: Self.authA)
            let seenByB = try await h.get("/v1/calls/\(id)", headers: Self.authB)
            #expect(EndToEndTests.deliveries(seenByA.json).map { $0["deviceKey"] as? String } == [DeviceKey.make(token: hexToken(1))])
            #expect(EndToEndTests.deliveries(seenByB.json).map { $0["deviceKey"] as? String } == [DeviceKey.make(token: hexToken(2))])
        }
    }

    @Test func cancellingAnUnknownCallIs404AndPublishesNothing() async throws {
        try await APIHarness.with { h in
            let answer = try await TestHTTPClient.request(.DELETE, port: h.port, path: "/v1/calls/\(CallID.make())", headers: testAuth)
            #expect(answer.status == 404)
            #expect(answer.contentType == "application/problem+json")
            #expect(h.publisher.count == 0)
        }
    }

    @Test func ringAndCancelEventsCarryTheTenant() async throws {
        try await APIHarness.with(Self.twoTenants()) { h in
            let id = CallID.make()
            #expect(try await h.post("/v1/calls", json(ringBody(callId: id)), headers: Self.authA).status == 202)
            #expect(try await TestHTTPClient.request(.DELETE, port: h.port, path: "/v1/calls/\(id)", headers: Self.authA).status == 202)
            let events = try h.publisher.records.withLock { records in try records.map { try CallRequest.decode($0.value) } }
            #expect(events.count == 2)
            guard case .ring(let ring)? = events.first, case .cancel(let cancel)? = events.last else {
                Issue.record("expected a ring then a cancel")
                return
            }
            #expect(ring.tenant == "a")
            #expect(cancel.tenant == "a")
        }
    }
}
