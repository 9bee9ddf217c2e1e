import Foundation
import Locking

/// The dedupe stores of the partitions this worker owns, one per partition.
public final class PartitionDedupe: Sendable {
    private let stores = Locked<[Int32: DedupeStore]>([:])
    private let retention: Duration
    private let capacity: Int

    public init(retention: Duration, capacity: Int) {
        self.retention = retention
        self.capacity = capacity
    }

    /// Records the delivery for `partition`; false when it was already handled there.
    public func insert(_ key: DeliveryKey, ringDeadline: Date, partition: Int32) -> Bool {
        stores.withLock { stores in
            stores[partition, default: DedupeStore(retention: retention, capacity: capacity)].insert(key, ringDeadline: ringDeadline)
        }
    }

    /// Forgets a delivery that was handed back without a durable outcome. Its entry was made when
    /// the delivery began (so a second copy arriving meanwhile is answered `duplicate`); kept after
    /// a hand-back, it would answer `duplicate` to the next copy although nothing recorded an outcome.
    public func release(_ key: DeliveryKey, partition: Int32) {
        stores.withLock { stores in stores[partition]?.remove(key) }
    }

    /// Installs a rebuilt store for a newly assigned partition.
    public func install(_ store: DedupeStore, partition: Int32) {
        stores.withLock { $0[partition] = store }
    }

    /// Drops the state of revoked partitions.
    public func remove(partitions: [Int32]) {
        stores.withLock { stores in for p in partitions { stores[p] = nil } }
    }

    /// Forgets entries whose deadline is past the retention, in every partition.
    public func expire(now: Date) {
        stores.withLock { stores in
            for key in Array(stores.keys) { stores[key]?.expire(now: now) }
        }
    }

    /// Total remembered deliveries (a gauge).
    public var count: Int { stores.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// A fresh store with this worker's limits (for rebuilding).
    public func makeStore() -> DedupeStore { DedupeStore(retention: retention, capacity: capacity) }
}
