import Foundation
import Locking

/// One store's entries and whether they count toward the worker's total (a store stops counting
/// when its partition's assignment ends).
struct CountedStore: Sendable {
    var store: DedupeStore
    var counted = true
}

/// The total of remembered deliveries across a worker's partitions, and the stores it covers.
///
/// Lock order: a store's lock, then this one's — never the other way round (eviction takes a
/// snapshot of the stores here, lets go, then locks them one at a time).
final class DedupeBudget: Sendable {
    struct State {
        var total = 0
        var stores: [ObjectIdentifier: Locked<CountedStore>] = [:]
    }

    let capacity: Int
    let state = Locked(State())

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Adds `delta` entries to the total; true when it is now over the bound. Called holding the
    /// store's lock.
    func add(_ delta: Int) -> Bool {
        state.withLock { state in
            state.total += delta
            return state.total > capacity
        }
    }

    /// Forgets, across all counted stores, the entries closest to expiry until the total is back
    /// within the bound. O(partitions) per entry, and only while over the bound.
    func evictOverflow() {
        while true {
            let (over, stores) = state.withLock { ($0.total > capacity, Array($0.stores.values)) }
            guard over else { return }
            var oldest: (store: Locked<CountedStore>, until: Date)?
            for store in stores {
                guard let until = store.withLock({ $0.counted ? $0.store.earliest() : nil }) else { continue }
                if oldest == nil || until < oldest!.until { oldest = (store, until) }
            }
            guard let oldest else { return }  // nothing counted is left to evict
            oldest.store.withLock { counted in
                // The store counts its evictions (`evictedEarly`), these included.
                guard counted.counted, counted.store.evictEarliest() else { return }
                state.withLock { $0.total -= 1 }
            }
        }
    }
}

/// One partition's dedupe store for one assignment, behind its own lock (deliveries of different
/// partitions never wait for each other). A delivery keeps the store it began with, so what it
/// does late — after the partition moved away and perhaps came back — touches only that store.
public final class PartitionDedupeStore: Sendable {
    let store: Locked<CountedStore>
    private let budget: DedupeBudget

    /// A store counted in `budget` from now on.
    init(_ store: DedupeStore, budget: DedupeBudget) {
        let counted = Locked(CountedStore(store: store))
        self.store = counted
        self.budget = budget
        let over = counted.withLock { counted in
            budget.state.withLock { state in
                state.stores[ObjectIdentifier(self.store)] = self.store
                state.total += counted.store.count
                return state.total > budget.capacity
            }
        }
        if over { budget.evictOverflow() }
    }

    /// Records the delivery; false when it was already handled.
    public func insert(_ key: DeliveryKey, ringDeadline: Date) -> Bool {
        let (inserted, over) = change { $0.insert(key, ringDeadline: ringDeadline) }
        if over { budget.evictOverflow() }
        return inserted
    }

    /// Forgets a delivery that was handed back without a durable outcome. Its entry was made when
    /// the delivery began (so a second copy arriving meanwhile is answered `duplicate`); kept after
    /// a hand-back, it would answer `duplicate` to the next copy although nothing recorded an outcome.
    public func remove(_ key: DeliveryKey) {
        _ = change { $0.remove(key) }
    }

    public func contains(_ key: DeliveryKey) -> Bool { store.withLock { $0.store.contains(key) } }

    func expire(now: Date) { _ = change { $0.expire(now: now) } }

    /// Stops counting this store in the total (its assignment ended). Deliveries still running
    /// keep it until they end; then it is freed.
    func retire() {
        store.withLock { counted in
            guard counted.counted else { return }
            counted.counted = false
            budget.state.withLock { state in
                state.total -= counted.store.count
                state.stores[ObjectIdentifier(self.store)] = nil
            }
        }
    }

    var count: Int { store.withLock { $0.store.count } }
    var evicted: Int { store.withLock { $0.store.evictedEarly } }

    /// Runs `body` on the store and moves the total by the change in its count; the second value
    /// is true when the total is now over the bound.
    private func change<Result>(_ body: (inout DedupeStore) -> Result) -> (Result, Bool) {
        store.withLock { counted in
            let before = counted.store.count
            let result = body(&counted.store)
            let delta = counted.store.count - before
            guard counted.counted, delta != 0 else { return (result, false) }
            return (result, budget.add(delta))
        }
    }
}

/// The dedupe stores of the partitions this worker owns, one per partition, held together to
/// `capacity` remembered deliveries (`CALLPUSH_DEDUPE_CAPACITY`): past it, the entries closest
/// to expiry go first, whichever partition holds them. A revoked partition's entries leave the
/// total at once.
public final class PartitionDedupe: Sendable {
    private struct State {
        var stores: [Int32: PartitionDedupeStore] = [:]
        /// Evictions of stores no longer installed (the counter only grows).
        var retiredEvictions = 0
    }

    private let state = Locked(State())
    private let retention: Duration
    private let budget: DedupeBudget

    /// - Parameter capacity: the most deliveries remembered at once across all partitions.
    public init(retention: Duration, capacity: Int) {
        self.retention = retention
        self.budget = DedupeBudget(capacity: capacity)
    }

    /// The store of `partition`'s current assignment (a fresh one if none was installed).
    public func store(for partition: Int32) -> PartitionDedupeStore {
        state.withLock { state in
            if let store = state.stores[partition] { return store }
            let store = PartitionDedupeStore(makeStore(), budget: budget)
            state.stores[partition] = store
            return store
        }
    }

    /// Installs a rebuilt store for a newly assigned partition.
    public func install(_ store: DedupeStore, partition: Int32) {
        let installed = PartitionDedupeStore(store, budget: budget)
        let retired = state.withLock { state in
            defer { state.stores[partition] = installed }
            return state.stores[partition]
        }
        if let retired { retire([retired]) }
    }

    /// Drops the state of revoked partitions.
    public func remove(partitions: [Int32]) {
        retire(state.withLock { state in partitions.compactMap { state.stores.removeValue(forKey: $0) } })
    }

    private func retire(_ stores: [PartitionDedupeStore]) {
        for store in stores { store.retire() }
        let evicted = stores.reduce(0) { $0 + $1.evicted }
        state.withLock { $0.retiredEvictions += evicted }
    }

    /// Forgets entries whose deadline is past the retention, in every partition.
    public func expire(now: Date) {
        for store in state.withLock({ Array($0.stores.values) }) { store.expire(now: now) }
    }

    /// Total remembered deliveries (a gauge).
    public var count: Int { budget.state.withLock { $0.total } }

    /// The bound on `count`.
    public var capacity: Int { budget.capacity }

    /// Entries dropped before their time because the total or a store was full, since start (a counter).
    public var evictions: Int {
        let (stores, retired) = state.withLock { (Array($0.stores.values), $0.retiredEvictions) }
        return stores.reduce(retired) { $0 + $1.evicted }
    }

    /// A fresh store with this worker's limits (for rebuilding): one partition may use the whole total.
    public func makeStore() -> DedupeStore { DedupeStore(retention: retention, capacity: budget.capacity) }
}
