import CallContract
import DequeModule
import Foundation
import Locking

/// Every dispatch instance's view of recent calls, fed from `voip.call-requests` (which devices a
/// call has) and `voip.call-status` (what happened to each), plus the calls this instance just
/// published. Bounded: a call is forgotten `window` after its last change, and the oldest calls go
/// first beyond `capacity`. `GET /v1/calls/{id}` and the SSE stream read it.
public final class StatusView: Sendable {
    /// What an SSE subscriber receives.
    public enum Event: Sendable, Hashable {
        case status(CallStatus)
        /// Every delivery is terminal.
        case complete
    }

    /// A subscription: the statuses known when it started, then changes on `events`.
    public struct Subscription: Sendable {
        public var initial: [CallStatus]
        public var complete: Bool
        public var events: AsyncStream<Event>
        public var cancel: @Sendable () -> Void
    }

    struct State {
        var calls: [String: CallView] = [:]
        var touched: [String: Double] = [:]
        var order: Deque<(callId: String, at: Double)> = []
        var subscribers: [String: [Int: AsyncStream<Event>.Continuation]] = [:]
        var nextSubscriber = 0

        mutating func touch(_ callId: String, now: Double) {
            touched[callId] = now
            order.append((callId, now))
        }

        mutating func evict(now: Double, window: Double, capacity: Int) {
            while let oldest = order.first, oldest.at < now - window || calls.count > capacity {
                order.removeFirst()
                if touched[oldest.callId] == oldest.at {
                    calls[oldest.callId] = nil
                    touched[oldest.callId] = nil
                }
            }
        }
    }

    private let state = Locked(State())
    private let window: Double
    private let capacity: Int
    private let now: @Sendable () -> Double

    public init(window: Duration, capacity: Int, now: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds) {
        self.window = window.seconds
        self.capacity = max(1, capacity)
        self.now = now
    }

    /// The call, if known.
    public func call(_ callId: String) -> CallView? {
        state.withLock { $0.calls[callId] }
    }

    /// Calls in the view now.
    public var count: Int { state.withLock { $0.calls.count } }

    /// Records ring events (read from the requests topic, or just published by this instance).
    ///
    /// `deviceKeys`: the rings' device keys when the caller has them (one SHA-256 per device saved);
    /// computed here otherwise, before the lock is taken.
    public func apply(rings: [RingRequest], deviceKeys: [String]? = nil, partition: Int32?, acceptedHere: Bool = false) {
        guard let callId = rings.first?.callId else { return }
        let keys = deviceKeys ?? rings.map { DeviceKey.make(token: $0.device.token) }
        let time = now()
        state.withLock { state in
            var call = state.calls[callId] ?? CallView(callId: callId)
            for (ring, key) in zip(rings, keys) where ring.callId == callId { call.apply(ring: ring, deviceKey: key, partition: partition) }
            if acceptedHere { call.acceptedHere = true }
            state.calls[callId] = call
            state.touch(callId, now: time)
            state.evict(now: time, window: window, capacity: capacity)
        }
    }

    /// Records a status event and tells the call's subscribers.
    public func apply(status: CallStatus, partition: Int32?) {
        let time = now()
        let notify = state.withLock { state -> [(AsyncStream<Event>.Continuation, [Event])] in
            var call = state.calls[status.callId] ?? CallView(callId: status.callId)
            let changed = call.apply(status: status, partition: partition)
            state.calls[status.callId] = call
            state.touch(status.callId, now: time)
            state.evict(now: time, window: window, capacity: capacity)
            guard changed, let subscribers = state.subscribers[status.callId] else { return [] }
            let events: [Event] = call.isComplete ? [.status(status), .complete] : [.status(status)]
            return subscribers.values.map { ($0, events) }
        }
        for (continuation, events) in notify {
            for event in events { continuation.yield(event) }
        }
    }

    /// Subscribes to a call's changes; nil when the call is unknown.
    public func subscribe(_ callId: String, bufferLimit: Int = 256) -> Subscription? {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .bufferingNewest(bufferLimit))
        let result = state.withLock { state -> (Int, [CallStatus], Bool)? in
            guard let call = state.calls[callId] else { return nil }
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.subscribers[callId, default: [:]][id] = continuation
            return (id, call.statuses, call.isComplete)
        }
        guard let result else {
            continuation.finish()
            return nil
        }
        let (id, initial, complete) = result
        let cancel: @Sendable () -> Void = { [weak self] in
            let removed = self?.state.withLock { state -> AsyncStream<Event>.Continuation? in
                let removed = state.subscribers[callId]?.removeValue(forKey: id)
                if state.subscribers[callId]?.isEmpty == true { state.subscribers[callId] = nil }
                return removed
            }
            removed?.finish()
        }
        continuation.onTermination = { _ in cancel() }
        return Subscription(initial: initial, complete: complete, events: stream, cancel: cancel)
    }

    /// Open SSE subscriptions.
    public var subscriberCount: Int { state.withLock { $0.subscribers.values.reduce(0) { $0 + $1.count } } }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
