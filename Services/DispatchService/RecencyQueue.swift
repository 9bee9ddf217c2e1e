import DequeModule
import Locking

/// Least-recently-used order for keys that are touched often, without one queue entry per touch:
/// each key has exactly one entry, stamped when it was queued; a touch only records the key's
/// newest stamp (in the owner's own table), and an entry whose key was touched since it was
/// queued goes to the back again when it reaches the front. So the queue never holds more entries
/// than keys, and eviction takes the least recently touched key.
struct RecencyQueue<Key: Hashable> {
    private var entries: Deque<(key: Key, stamp: Double)> = []

    var count: Int { entries.count }

    /// The stamp the front entry was queued with: no key's latest stamp is older, so nothing is
    /// older than this (nil when empty). A cheap check before ``oldest(in:stamp:)``.
    var frontStamp: Double? { entries.first?.stamp }

    /// Queues a key that is not queued yet (a new key), stamped `stamp`.
    mutating func append(_ key: Key, stamp: Double) {
        entries.append((key, stamp))
    }

    /// The least recently touched key of `table` with its latest stamp (requeueing keys touched since
    /// they were queued), without removing it; nil when empty. `stamp` gives a value's newest stamp;
    /// entries of keys no longer in `table` are dropped.
    mutating func oldest<Value>(in table: [Key: Value], stamp: (Value) -> Double) -> (key: Key, stamp: Double)? {
        while let front = entries.first {
            guard let stamp = table[front.key].map(stamp) else {
                entries.removeFirst()
                continue
            }
            if stamp > front.stamp {
                entries.removeFirst()
                entries.append((front.key, stamp))
                continue
            }
            return (front.key, stamp)
        }
        return nil
    }

    /// Removes the front entry (after ``oldest(latest:)`` returned it).
    mutating func removeOldest() {
        entries.removeFirst()
    }
}

/// How long and how much a windowed store in dispatch keeps (the idempotency store, the status
/// view): entries go `window` after their last change, and the oldest go first while the store is
/// over `budgetBytes`. Times are seconds of `now`, a monotonic clock.
struct Retention: Sendable {
    let window: Double
    /// At least 1.
    let budgetBytes: Int
    let now: @Sendable () -> Double

    init(window: Duration, budgetBytes: Int, now: @escaping @Sendable () -> Double) {
        self.window = window.inSeconds
        self.budgetBytes = max(1, budgetBytes)
        self.now = now
    }
}
