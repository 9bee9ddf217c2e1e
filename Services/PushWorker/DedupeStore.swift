import Foundation
import Locking

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

/// A delivery key as it is remembered: 128 bits of two keyed hashes of its fields (Swift's
/// `Hasher`, seeded afresh by each process; the store lives in one process and is rebuilt from the
/// status history by it). 16 bytes inline instead of two heap strings per entry — a worker draining
/// a backlog remembers every delivery of the last minutes, and the strings were most of that memory.
/// Two different deliveries share a digest with probability ~n²/2¹²⁹: nil for any real n.
struct DeliveryDigest: Hashable, Sendable {
    private let first: Int
    private let second: Int

    init(_ key: DeliveryKey) {
        var a = Hasher()
        a.combine(0 as UInt8)
        a.combine(key.callId)
        a.combine(key.deviceKey)
        a.combine(key.replay)
        var b = Hasher()
        b.combine(1 as UInt8)
        b.combine(key.callId)
        b.combine(key.deviceKey)
        b.combine(key.replay)
        first = a.finalize()
        second = b.finalize()
    }

    /// `first` is already a keyed hash of the whole key.
    func hash(into hasher: inout Hasher) { hasher.combine(first) }
}

/// The deliveries one partition has already handled, so a re-delivered event (after a crash or a
/// rebalance) is answered `duplicate` instead of ringing the phone again.
///
/// Bounded by deadlines: an entry is only needed while its call could still ring, so it is
/// forgotten `retention` after its ring deadline. A hard `capacity` bounds memory under any
/// input; when full, the entries closest to expiry go first (O(log n) each, see `ExpiringSet`).
/// In the worker, `PartitionDedupe` also holds the stores of all its partitions to one total.
public struct DedupeStore: Sendable {
    private var entries: ExpiringSet<DeliveryDigest>
    public let retention: Duration

    public init(retention: Duration = .seconds(60), capacity: Int = 200_000) {
        self.retention = retention
        self.entries = ExpiringSet(capacity: capacity)
    }

    public var capacity: Int { entries.capacity }
    public var count: Int { entries.count }
    /// Entries dropped because the store was full (exported as `callpush_worker_dedupe_evictions_total`).
    public var evictedEarly: Int { entries.evicted }

    /// Whether `key` was already handled.
    public func contains(_ key: DeliveryKey) -> Bool { entries.contains(DeliveryDigest(key)) }

    /// Records `key` as handled until `ringDeadline` (+ retention). Returns false when it already was.
    @discardableResult
    public mutating func insert(_ key: DeliveryKey, ringDeadline: Date) -> Bool {
        entries.insert(DeliveryDigest(key), until: ringDeadline.addingTimeInterval(retention.inSeconds))
    }

    /// Records `key` as handled until `date`: a delivery rebuilt from the status history, whose
    /// ring deadline the status does not carry.
    public mutating func remember(_ key: DeliveryKey, until date: Date) {
        entries.insert(DeliveryDigest(key), until: date)
    }

    /// Forgets `key` (its delivery was handed back without a durable outcome).
    public mutating func remove(_ key: DeliveryKey) {
        entries.remove(DeliveryDigest(key))
    }

    /// Forgets entries whose ring deadline is more than `retention` before `now`.
    public mutating func expire(now: Date) {
        entries.expire(before: now)
    }

    /// When the entry closest to expiry expires, if there is one.
    mutating func earliest() -> Date? { entries.earliest() }

    /// Forgets the entry closest to expiry to make room in the worker's total; false when empty.
    mutating func evictEarliest() -> Bool { entries.evictEarliest() }

    /// Storage slots held, live or not (memory follows this, about 24–48 bytes a slot).
    var reservedSlots: Int { entries.reservedSlots }
}
