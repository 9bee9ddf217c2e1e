import CallContract
import Foundation
import Locking
import NIOCore

/// Every dispatch instance's view of recent calls, fed from `voip.call-requests` (which devices a
/// call has) and `voip.call-status` (what happened to each), plus the calls this instance just
/// published. `GET /v1/calls/{id}` and the SSE stream read it.
///
/// Bounded in bytes (an estimate per call, see ``CallView``): a call is forgotten `window` after
/// its last change, and beyond `budgetBytes` the least recently changed call of the tenant holding
/// the most bytes goes first, so one noisy tenant evicts its own calls before anyone else's.
/// A change touches the call's recency in place (no queue entry per status).
public final class StatusView: Sendable {
    /// A subscription: the statuses known when it started (after `Last-Event-ID`), then new
    /// frames and the end on `buffer`.
    public struct Subscription: Sendable {
        public var initial: [(id: Int64, status: CallStatus)]
        public var complete: Bool
        public var buffer: EventBuffer
        public var cancel: @Sendable () -> Void
    }


    struct Entry {
        var view: CallView
        var bytes: Int
        var touched: Double
    }

    struct Usage {
        var bytes = 0
        var order = RecencyQueue<CallKey>()
    }

    struct State {
        var calls: [CallKey: Entry] = [:]
        /// The tenants that have a call of this id (nearly always one, kept without an array).
        var tenantsOf: [String: Tenants] = [:]
        var usage: [String: Usage] = [:]
        var bytes = 0
        var subscribers: [CallKey: [Int: EventBuffer]] = [:]
        var nextSubscriber = 0

        /// The call a status belongs to: its tenant's, else the one call of that id, else the one
        /// whose deliveries include the device.
        func route(_ status: CallStatus) -> CallKey {
            if let tenant = status.tenant { return CallKey(tenant: tenant, callId: status.callId) }
            guard let tenants = tenantsOf[status.callId] else { return CallKey(tenant: nil, callId: status.callId) }
            if tenants.more.isEmpty, let only = tenants.first { return CallKey(tenant: only, callId: status.callId) }
            for tenant in tenants.all {
                let key = CallKey(tenant: tenant, callId: status.callId)
                if calls[key]?.view.deliveries.contains(where: { $0.deviceKey == status.deviceKey }) == true { return key }
            }
            return CallKey(tenant: nil, callId: status.callId)
        }

        /// Changes the call under `key` in place (a new one for `tenant` when unknown), updating the
        /// byte counts and the key's recency. One lookup of the call, and no copy of its arrays
        /// (a copy taken out and stored back made every change copy the call's events).
        mutating func update<Result>(_ key: CallKey, tenant: String?, now: Double, _ change: (inout CallView) -> Result) -> Result {
            var old = -1
            let (result, added) = Self.change(&calls[key, default: Entry(view: CallView(callId: key.callId, tenant: tenant), bytes: -1, touched: now)]) {
                entry -> (Result, Int) in
                old = entry.bytes
                let result = change(&entry.view)
                entry.bytes = entry.view.estimatedBytes
                entry.touched = now
                return (result, entry.bytes - max(old, 0))
            }
            let isNew = old < 0
            bytes += added
            // One lookup of the tenant's usage (a ring or status changes it on every request).
            Self.change(&usage[key.tenant, default: Usage()]) { usage in
                usage.bytes += added
                if isNew { usage.order.append(key, stamp: now) }
            }
            if isNew {
                Self.change(&tenantsOf[key.callId, default: Tenants()]) { $0.insert(key.tenant) }
            }
            return result
        }

        /// Runs `body` on `value` (lets one dictionary access serve a read and a write).
        static func change<Value, Result>(_ value: inout Value, _ body: (inout Value) -> Result) -> Result { body(&value) }

        /// Forgets the oldest call of `tenant` (found by ``RecencyQueue/oldest(in:stamp:)``).
        mutating func removeOldest(of tenant: String, key: CallKey) -> [EventBuffer] {
            usage[tenant]?.order.removeOldest()
            guard let entry = calls.removeValue(forKey: key) else { return [] }
            bytes -= entry.bytes
            usage[tenant]?.bytes -= entry.bytes
            if usage[tenant]?.order.count == 0 { usage[tenant] = nil }
            if tenantsOf[key.callId]?.remove(key.tenant) == true { tenantsOf[key.callId] = nil }
            return subscribers.removeValue(forKey: key).map { Array($0.values) } ?? []
        }

        /// Forgets calls unchanged for `window`, then the least recently changed calls of the
        /// largest tenant while over `budget`. Returns the buffers of streams whose call went.
        mutating func evict(now: Double, window: Double, budget: Int) -> [EventBuffer] {
            var ended: [EventBuffer] = []
            // Only tenants whose front entry is older than the window can have a call to forget (an
            // entry's stamp is at most its call's last change): no list of every tenant per change.
            var aged: [String] = []
            for (tenant, usage) in usage where (usage.order.frontStamp ?? .infinity) < now - window { aged.append(tenant) }
            for tenant in aged {
                while let oldest = usage[tenant]?.order.oldest(in: calls, stamp: \.touched), oldest.stamp < now - window {
                    ended += removeOldest(of: tenant, key: oldest.key)
                }
            }
            while bytes > budget, let tenant = usage.max(by: { $0.value.bytes < $1.value.bytes })?.key {
                guard let oldest = usage[tenant]?.order.oldest(in: calls, stamp: \.touched) else {
                    usage[tenant] = nil
                    continue
                }
                ended += removeOldest(of: tenant, key: oldest.key)
            }
            return ended
        }
    }

    /// The tenants of one call id: the first inline, any others in an array (empty, so no
    /// allocation, for nearly every call).
    struct Tenants {
        var first: String?
        var more: [String] = []

        var all: [String] { (first.map { [$0] } ?? []) + more }

        /// Adds a tenant not present yet.
        mutating func insert(_ tenant: String) {
            if first == nil { first = tenant } else { more.append(tenant) }
        }

        /// Removes `tenant`; true when none is left.
        mutating func remove(_ tenant: String) -> Bool {
            if first == tenant {
                first = more.isEmpty ? nil : more.removeFirst()
            } else {
                more.removeAll { $0 == tenant }
            }
            return first == nil
        }
    }

    private let state = Locked(State())
    private let retention: Retention
    /// Most bytes of calls held (estimated).
    public var budgetBytes: Int { retention.budgetBytes }

    public init(window: Duration, budgetBytes: Int, now: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds) {
        retention = Retention(window: window, budgetBytes: budgetBytes, now: now)
    }

    /// The call, if known.
    public func call(_ key: CallKey) -> CallView? {
        state.withLock { $0.calls[key]?.view }
    }

    /// Every tenant's call of this id (an ack names only the call id and the device).
    public func calls(callId: String) -> [CallView] {
        state.withLock { state in
            (state.tenantsOf[callId]?.all ?? []).compactMap { state.calls[CallKey(tenant: $0, callId: callId)]?.view }
        }
    }

    /// Calls in the view now.
    public var count: Int { state.withLock { $0.calls.count } }
    /// Estimated bytes held now (at most ``budgetBytes``).
    public var bytes: Int { state.withLock { $0.bytes } }
    /// Entries of the recency queues (one per call however many statuses arrived).
    var queuedEntries: Int { state.withLock { $0.usage.values.reduce(0) { $0 + $1.order.count } } }

    /// Records ring events (read from the requests topic, or just published by this instance).
    ///
    /// `deviceKeys`: the rings' device keys when the caller has them (one SHA-256 per device saved);
    /// computed here otherwise, before the lock is taken.
    public func apply(rings: [RingRequest], deviceKeys: [String]? = nil, partition: Int32?) {
        guard let first = rings.first else { return }
        let key = CallKey(tenant: first.tenant, callId: first.callId)
        let keys = deviceKeys ?? rings.map { DeviceKey.make(token: $0.device.token) }
        let time = retention.now()
        let ended = state.withLock { state -> [EventBuffer] in
            state.update(key, tenant: first.tenant, now: time) { call in
                for (ring, deviceKey) in zip(rings, keys) where ring.callId == key.callId && ring.tenant == first.tenant {
                    call.apply(ring: ring, deviceKey: deviceKey, partition: partition)
                }
            }
            return state.evict(now: time, window: retention.window, budget: retention.budgetBytes)
        }
        for buffer in ended { buffer.finish(complete: false) }
    }

    /// Records a status event (`offset`: its offset on the status partition, the SSE event id;
    /// nil numbers it after the call's latest) and tells the call's subscribers. Returns how
    /// many SSE streams it was written to.
    @discardableResult
    public func apply(status: CallStatus, partition: Int32?, offset: Int64? = nil) -> Int {
        // A worker's record of a processed cancel is about the call, not a delivery: each pending
        // delivery gets its own `cancelled` status.
        guard !status.isCancelMarker else { return 0 }
        let time = retention.now()
        let (notify, complete, eventID, ended) = state.withLock { state in
            let key = state.route(status)
            let (changed, eventID, complete) = state.update(key, tenant: status.tenant, now: time) { call in
                let eventID = offset ?? call.lastEventID + 1
                return (call.apply(status: status, partition: partition, eventID: eventID), eventID, call.isComplete)
            }
            let ended = state.evict(now: time, window: retention.window, budget: retention.budgetBytes)
            let notify = changed ? Array((state.subscribers[key] ?? [:]).values) : []
            return (notify, complete, eventID, ended)
        }
        for buffer in ended { buffer.finish(complete: false) }
        guard !notify.isEmpty else { return 0 }
        let frame = Self.frame(id: eventID, status: status)
        for buffer in notify {
            buffer.push(frame)
            if complete { buffer.finish(complete: true) }
        }
        return notify.count
    }

    /// Subscribes to a call's changes; nil when the call is unknown. `after`: the client's
    /// `Last-Event-ID` (only newer statuses are in `initial`).
    public func subscribe(_ key: CallKey, after lastEventID: Int64? = nil, bufferBytes: Int = 64 * 1024) -> Subscription? {
        let buffer = EventBuffer(limit: bufferBytes)
        let result = state.withLock { state -> (Int, [(id: Int64, status: CallStatus)], Bool)? in
            guard let call = state.calls[key]?.view else { return nil }
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.subscribers[key, default: [:]][id] = buffer
            return (id, call.events.filter { $0.id > (lastEventID ?? Int64.min) }, call.isComplete)
        }
        guard let (id, initial, complete) = result else { return nil }
        let cancel: @Sendable () -> Void = { [weak self] in
            _ = self?.state.withLock { state -> EventBuffer? in
                let removed = state.subscribers[key]?.removeValue(forKey: id)
                if state.subscribers[key]?.isEmpty == true { state.subscribers[key] = nil }
                return removed
            }
        }
        return Subscription(initial: initial, complete: complete, buffer: buffer, cancel: cancel)
    }

    /// Open SSE subscriptions.
    public var subscriberCount: Int { state.withLock { $0.subscribers.values.reduce(0) { $0 + $1.count } } }

    /// One SSE `status` frame with its event id.
    public static func frame(id: Int64, status: CallStatus) -> ByteBuffer {
        let json = (try? status.encoded()).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return ByteBuffer(string: "id: \(id)\nevent: status\ndata: \(json)\n\n")
    }
}

