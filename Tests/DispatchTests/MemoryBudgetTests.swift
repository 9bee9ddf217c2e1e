import CallContract
import CallpushTestSupport
import Foundation
import Testing
import Locking
@testable import DispatchService

/// The stores that grow with outside input are bounded in bytes: filled past capacity with the
/// largest entries the API lets in, each stays within its budget.
@Suite struct MemoryBudgetTests {
    /// A ten-device call with 128-byte device ids, as large as a ring request gets by default.
    static func largestRings(callId: String = CallID.make(), tenant: String) -> [RingRequest] {
        let now = Date()
        return (0..<10).map { index in
            RingRequest(callId: callId, app: "rider",
                        device: Device(token: hexToken(index, digits: 200), environment: .production,
                                       id: String(repeating: "d", count: 124) + String(format: "%04d", index)),
                        caller: Caller(handle: String(repeating: "h", count: 256), displayName: String(repeating: "n", count: 256)),
                        requestedAt: now, ringDeadline: now.addingTimeInterval(600), tenant: tenant)
        }
    }

    /// Every delivery with a worker status and a device report carrying long strings.
    static func fill(_ view: StatusView, calls: Int, tenant: String) -> [String] {
        var ids: [String] = []
        for _ in 0..<calls {
            let rings = largestRings(tenant: tenant)
            view.apply(rings: rings, partition: 0)
            for ring in rings {
                let key = DeviceKey.make(token: ring.device.token)
                view.apply(status: CallStatus(callId: ring.callId, deviceId: ring.device.id, deviceKey: key, app: "rider", state: .failed,
                                              attempt: 3, at: Date(), apns: .init(id: CallID.make(), status: 410, reason: "Unregistered"),
                                              error: .init(code: "Unregistered", message: String(repeating: "m", count: 1_000)),
                                              worker: String(repeating: "w", count: 256), tenant: tenant), partition: 0)
                view.apply(status: CallStatus(callId: ring.callId, deviceId: ring.device.id, deviceKey: key, state: .suppressed, at: Date(),
                                              error: .init(code: "filteredByDoNotDisturb", message: String(repeating: "e", count: 256),
                                                           domain: "com.apple.CallKit.error.incomingcall"),
                                              worker: "dispatch", tenant: tenant), partition: 0)
            }
            ids.append(rings[0].callId)
        }
        return ids
    }

    @Test func theStatusViewStaysWithinItsBytesAndANoisyTenantEvictsItsOwnCallsFirst() {
        let view = StatusView(window: .seconds(3_600), budgetBytes: 2 << 20)
        let quiet = Self.fill(view, calls: 3, tenant: "quiet")
        var peak = 0
        for _ in 0..<20 {
            _ = Self.fill(view, calls: 10, tenant: "noisy")
            peak = max(peak, view.bytes)
        }
        #expect(peak <= view.budgetBytes)
        #expect(view.count > 50, "the budget holds many large calls (\(view.count))")
        for id in quiet { #expect(view.call(CallKey(tenant: "quiet", callId: id)) != nil, "the quiet tenant's calls survive the flood") }
    }

    @Test func manyStatusesOfOneCallKeepItsRecencyQueueAtOneEntry() {
        let view = StatusView(window: .seconds(3_600), budgetBytes: 1 << 20)
        let rings = Self.largestRings(tenant: "t")
        view.apply(rings: rings, partition: 0)
        let key = DeviceKey.make(token: rings[0].device.token)
        let before = view.bytes
        for attempt in 1...100_000 {
            view.apply(status: CallStatus(callId: rings[0].callId, deviceKey: key, state: .retrying, attempt: attempt, at: Date(), worker: "w",
                                          tenant: "t"), partition: 0)
        }
        #expect(view.queuedEntries == 1)
        #expect(view.bytes < before + 4_096, "a status replaces the delivery's previous one")
    }

    @Test func theIdempotencyAndAckStoresStayWithinTheirBytes() async {
        let store = IdempotencyStore(window: .seconds(600), budgetBytes: 1 << 20)
        let answer = APIModels.Accepted(rings: Self.largestRings(tenant: "t")).encoded()
        for _ in 0..<2_000 {
            let key = "t/" + CallID.make()
            let fingerprint = Array(repeating: UInt8(7), count: 32)
            #expect(await store.begin(key: key, fingerprint: fingerprint) == .proceed)
            store.finish(key: key, fingerprint: fingerprint, response: answer)
            #expect(store.bytes <= store.budgetBytes)
        }
        #expect(store.count > 100)
    }

    @Test func rateLimitTablesKeepTheirMostRecentKeysWithinTheirCapacity() {
        let clock = Locked(0.0)
        let limiter = KeyedRateLimiter(ratePerSecond: 1, burst: 1, capacity: 1_000, now: { clock.withLock { $0 } })
        #expect(limiter.acquire("busy") == nil)
        for index in 0..<10_000 {
            clock.withLock { $0 += 0.001 }
            _ = limiter.acquire("address-\(index)")
            if index % 100 == 0 { _ = limiter.acquire("busy") }
        }
        #expect(limiter.count <= 1_000)
        #expect(limiter.acquire("busy") != nil, "a key in use is not forgotten (its bucket is still empty)")
    }
}
