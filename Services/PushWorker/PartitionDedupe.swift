import Foundation
import Locking

/// One partition's dedupe store for one assignment, behind its own lock (deliveries of different
/// partitions never wait for each other). A delivery keeps the store it began with, so what it
/// does late — after the partition moved away and perhaps came back — touches only that store.
public final class PartitionDedupeStore: Sendable {
    private let store: Locked<DedupeStore>

    init(_ store: DedupeStore) {
        self.store = Locked(store)
    }

    /// Records the delivery; false when it was already handled.
    public func insert(_ key: DeliveryKey, ringDeadline: Date) -> Bool {
        store.withLock { $0.insert(key, ringDeadline: ringDeadline) }
    }

    /// Forgets a delivery that was handed back without a durable outcome. Its entry was made when
    /// the delivery began (so a second copy arriving meanwhile is answered `duplicate`); kept after
    /// a hand-back, it would answer `duplicate` to the next copy although nothing recorded an outcome.
    public func remove(_ key: DeliveryKey) {
        store.withLock { $0.remove(key) }
    }

    public func contains(_ key: DeliveryKey) -> Bool { store.withLock { $0.contains(key) } }

    func expire(now: Date) { store.withLock { $0.expire(now: now) } }

    var count: Int { store.withLock { $0.count } }
    var evicted: Int { store.withLock { $0.evictedEarly } }
}

/// The dedupe stores of the partitions this worker owns, one per partition.
public final class PartitionDedupe: Sendable {
    private struct State {
        var stores: [Int32: PartitionDedupeStore] = [:]
        /// Evictions of stores no longer installed (the counter only grows).
        var retiredEvictions = 0
    }

    private let state = Locked(State())
    private let retention: Duration
    private let capacity: Int

    public init(retention: Duration, capacity: Int) {
        self.retention = retention
        self.capacity = capacity
    }

    /// The store of `partition`'s current assignment (a fresh one if none was installed).
    public func store(for partition: Int32) -> PartitionDedupeStore {
        state.withLock { state in
            if let store = state.stores[partition] { return store }
            let store = PartitionDedupeStore(makeStore())
            state.stores[partition] = store
            return store
        }
    }

    /// Installs a rebuilt store for a newly assigned partition.
    public func install(_ store: DedupeStore, partition: Int32) {
        let retired = state.withLock { state in
            defer { state.stores[partition] = PartitionDedupeStore(store) }
            return state.stores[partition]
        }
        if let retired { state.withLock { $0.retiredEvictions += retired.evicted } }
    }

    /// Drops the state of revoked partitions.
    public func remove(partitions: [Int32]) {
        let retired = state.withLock { state in partitions.compactMap { state.stores.removeValue(forKey: $0) } }
        let evicted = retired.reduce(0) { $0 + $1.evicted }
        state.withLock { $0.retiredEvictions += evicted }
    }

    /// Forgets entries whose deadline is past the retention, in every partition.
    public func expire(now: Date) {
        for store in state.withLock({ Array($0.stores.values) }) { store.expire(now: now) }
    }

    /// Total remembered deliveries (a gauge).
    public var count: Int { state.withLock { Array($0.stores.values) }.reduce(0) { $0 + $1.count } }

    /// Entries dropped because a store was full, since start (a counter).
    public var evictions: Int {
        let (stores, retired) = state.withLock { (Array($0.stores.values), $0.retiredEvictions) }
        return stores.reduce(retired) { $0 + $1.evicted }
    }

    /// A fresh store with this worker's limits (for rebuilding).
    public func makeStore() -> DedupeStore { DedupeStore(retention: retention, capacity: capacity) }
}
