import Foundation
import HeapModule

/// Keys remembered until a time each, at most `capacity` of them. When full, the key that would
/// be forgotten soonest makes room. The dedupe stores and the cancel memory are both this.
///
/// A key's expiry lives in a dictionary; a min-heap orders (expiry, key) pairs so that eviction
/// and expiry cost O(log n) per key. Entries whose key was removed or re-dated stay in the heap
/// until they surface (they are recognised by comparing with the dictionary) or until the heap is
/// rebuilt from the dictionary when stale entries outnumber live ones: amortised O(log n).
///
/// Neither a Swift dictionary nor an array gives memory back when elements leave, so a set that
/// held many keys and forgot most of them is rebuilt at its new size (amortised O(1) per key
/// forgotten): memory follows what is remembered, not what once was.
struct ExpiringSet<Key: Hashable & Sendable>: Sendable {
    private struct Entry: Comparable, Sendable {
        var until: Date
        var key: Key
        static func < (lhs: Entry, rhs: Entry) -> Bool { lhs.until < rhs.until }
        static func == (lhs: Entry, rhs: Entry) -> Bool { lhs.until == rhs.until && lhs.key == rhs.key }
    }

    private var until: [Key: Date] = [:]
    private var heap = Heap<Entry>()
    let capacity: Int
    /// Keys dropped to make room before their time (a metric: should stay 0).
    private(set) var evicted = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int { until.count }

    func contains(_ key: Key) -> Bool { until[key] != nil }

    /// When `key` will be forgotten, if it is remembered.
    func expiry(of key: Key) -> Date? { until[key] }

    /// Remembers `key` until `date` (or keeps its later expiry). Returns false when it was
    /// already remembered.
    @discardableResult
    mutating func insert(_ key: Key, until date: Date) -> Bool {
        if until.count >= capacity, until[key] == nil {
            while until.count >= capacity, let victim = popLive() {
                until[victim.key] = nil
                evicted += 1
            }
        }
        // One lookup for the usual case, a new key; a known one gets its earlier expiry back unless this is later.
        if let existing = until.updateValue(date, forKey: key) {
            if date > existing {
                push(Entry(until: date, key: key))
            } else {
                until[key] = existing
            }
            return false
        }
        push(Entry(until: date, key: key))
        return true
    }

    /// Forgets `key`.
    mutating func remove(_ key: Key) {
        until[key] = nil
        compactIfSparse()
    }

    /// Forgets every key whose time is before `cutoff`.
    mutating func expire(before cutoff: Date) {
        while let first = heap.min, first.until < cutoff {
            heap.removeMin()
            if until[first.key] == first.until { until[first.key] = nil }
        }
        compactIfSparse()
    }

    /// When the key remembered longest so far will be forgotten, if any is remembered.
    mutating func earliest() -> Date? {
        while let first = heap.min {
            if until[first.key] == first.until { return first.until }
            heap.removeMin()
        }
        return nil
    }

    /// Forgets the key that would be forgotten soonest, to make room elsewhere (counted in
    /// `evicted`). False when the set is empty.
    mutating func evictEarliest() -> Bool {
        guard let victim = popLive() else { return false }
        until[victim.key] = nil
        evicted += 1
        compactIfSparse()
        return true
    }

    /// Slots of storage held (dictionary buckets and heap entries), live or not.
    var reservedSlots: Int { until.capacity + heap.unordered.capacity }

    /// Rebuilds both structures at the live size once the dictionary has over 4× room for it
    /// (above a floor, so that small sets are left alone).
    private mutating func compactIfSparse() {
        guard until.capacity > 4_096, until.capacity > 4 * until.count else { return }
        var live = [Key: Date](minimumCapacity: until.count)
        for (key, date) in until { live[key] = date }
        until = live
        heap = Heap(until.map { Entry(until: $0.value, key: $0.key) })
    }

    /// Removes and returns the live entry that expires first.
    private mutating func popLive() -> Entry? {
        while let first = heap.popMin() {
            if until[first.key] == first.until { return first }
        }
        return nil
    }

    private mutating func push(_ entry: Entry) {
        heap.insert(entry)
        if heap.count > 2 * until.count + 1_024 {
            heap = Heap(until.map { Entry(until: $0.value, key: $0.key) })
        }
    }
}
