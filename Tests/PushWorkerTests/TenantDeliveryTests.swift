import CallContract
import CallpushCore
import Foundation
import Testing
@testable import PushWorker

/// Tenants on the worker side: statuses carry the ring's tenant, a tenant's cancel stops only its
/// own ring of a call id, and the ack token carries the ring deadline and replay generation.
@Suite struct TenantDelivery {
    static func ring(tenant: String?, token: String = String(repeating: "ab", count: 32), callId: String = CallID.make(), replay: Int = 0) -> RingRequest {
        var ring = makeRing(token: token, callId: callId, replay: replay)
        ring.tenant = tenant
        return ring
    }

    @Test func statusesCarryTheTenantAndTheAckTokenItsDeadlineAndGeneration() async throws {
        let h = Harness()
        let ring = Self.ring(tenant: "taxi", replay: 2)
        #expect(try await h.process(.ring(ring)) == .finished(.sent))
        #expect(h.publisher.statuses.map(\.tenant) == ["taxi"])
        let payload = try VoIPPayload.decode(try #require(h.sender.sent.first).push.payload)
        let claims = try #require(AckTokenSigner(secret: testSecret).claims(payload.ackToken, callId: ring.callId, deviceKey: payload.deviceKey))
        #expect(claims.version == 2)
        #expect(claims.replay == 2)
        #expect(claims.ringDeadline == ring.ringDeadline)
    }

    @Test func aTenantsCancelStopsOnlyItsOwnRingOfTheCallId() async throws {
        let h = Harness()
        let callId = CallID.make()
        #expect(try await h.process(.cancel(CancelRequest(callId: callId, requestedAt: Date(), tenant: "clinic"))) == .finished(.cancelled))
        #expect(try await h.process(.ring(Self.ring(tenant: "taxi", token: String(repeating: "cd", count: 32), callId: callId))) == .finished(.sent),
                "another tenant's cancel of the same id")
        #expect(try await h.process(.ring(Self.ring(tenant: "clinic", callId: callId))) == .finished(.cancelled))
        #expect(h.publisher.cancelMarkers.map(\.tenant) == ["clinic"], "the recorded cancel keeps its tenant for the next owner")
    }

    @Test func aCancelWithoutTenantStopsEveryRingOfTheCall() async throws {
        let h = Harness()
        let callId = CallID.make()
        #expect(try await h.process(.cancel(CancelRequest(callId: callId, requestedAt: Date()))) == .finished(.cancelled))
        #expect(try await h.process(.ring(Self.ring(tenant: "taxi", callId: callId))) == .finished(.cancelled))
        #expect(try await h.process(.ring(Self.ring(tenant: nil, token: String(repeating: "cd", count: 32), callId: callId))) == .finished(.cancelled))
    }
}
