import Foundation

/// Identifies one delivery for deduplication: a call, a device, a replay generation.
public struct DeliveryKey: Sendable, Hashable, CustomStringConvertible {
    public var callId: String
    /// `DeviceKey.make(token:)` of the device token — never the token itself.
    public var deviceKey: String
    public var replay: Int

    public init(callId: String, deviceKey: String, replay: Int) {
        self.callId = callId
        self.deviceKey = deviceKey
        self.replay = replay
    }

    public var description: String { "\(callId)/\(deviceKey.prefix(8))/r\(replay)" }
}

/// The deliveries one partition has already handled, so a re-delivered event (after a crash or a
/// rebalance) is answered `duplicate` instead of ringing the phone again.
///
/// Bounded by deadlines: an entry is only needed while its call could still ring, so it is
/// forgotten `retention` after its ring deadline. A hard `capacity` bounds memory under any
/// input; when full, the entries closest to expiry go first.
public struct DedupeStore: Sendable {
    private var deadlines: [DeliveryKey: Date] = [:]
    public let retention: Duration
    public let capacity: Int
    /// Entries dropped because the store was full (a metric: should stay 0).
    public private(set) var evictedEarly = 0

    public init(retention: Duration = .seconds(60), capacity: Int = 200_000) {
        self.retention = retention
        self.capacity = max(1, capacity)
    }

    public var count: Int { deadlines.count }

    /// Whether `key` was already handled.
    public func contains(_ key: DeliveryKey) -> Bool { deadlines[key] != nil }

    /// Records `key` as handled until `ringDeadline` (+ retention). Returns false when it already was.
    @discardableResult
    public mutating func insert(_ key: DeliveryKey, ringDeadline: Date) -> Bool {
        if let existing = deadlines[key] {
            if ringDeadline > existing { deadlines[key] = ringDeadline }
            return false
        }
        if deadlines.count >= capacity { evictSoonest(deadlines.count - capacity + 1) }
        deadlines[key] = ringDeadline
        return true
    }

    /// Forgets `key` (its delivery was handed back without a durable outcome).
    public mutating func remove(_ key: DeliveryKey) {
        deadlines[key] = nil
    }

    /// Forgets entries whose ring deadline is more than `retention` before `now`.
    public mutating func expire(now: Date) {
        let cutoff = now.addingTimeInterval(-retention.seconds)
        deadlines = deadlines.filter { $0.value >= cutoff }
    }

    private mutating func evictSoonest(_ count: Int) {
        let victims = deadlines.sorted { $0.value < $1.value }.prefix(count)
        for (key, _) in victims { deadlines[key] = nil }
        evictedEarly += victims.count
    }
}

extension Duration {
    /// The duration in (fractional) seconds.
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}
