import DequeModule

/// Which offset of one partition may be stored, with many messages in flight.
///
/// Messages of a partition are begun in offset order and may finish in any order. The offset to
/// store (committed position = last finished + 1) only advances over a prefix of finished
/// messages: a message that is still being retried holds back every later one, so a crash
/// re-delivers it and everything after it rather than skipping it (at-least-once).
public struct OffsetTracker: Sendable {
    private struct Entry: Sendable {
        var offset: Int64
        var finished: Bool
        var began: ContinuousClock.Instant
    }

    private var entries: Deque<Entry> = []
    /// The next offset to store (one past the last message of the finished prefix), if any advanced.
    public private(set) var committable: Int64?

    public init() {}

    /// Number of begun, unfinished-or-blocked messages.
    public var inFlight: Int { entries.count }

    /// The lowest offset not yet finished, if any.
    public var lowestUnfinished: Int64? { entries.first?.offset }

    /// When the lowest unfinished message was begun (its age is how long the partition's offset
    /// has been held back).
    public var oldestBegan: ContinuousClock.Instant? { entries.first?.began }

    /// Records that processing of `offset` began. Offsets must be begun in increasing order;
    /// an offset not greater than the last begun one (a re-delivery after a seek) is ignored
    /// and `false` is returned.
    @discardableResult
    public mutating func begin(_ offset: Int64, at now: ContinuousClock.Instant = .now) -> Bool {
        if let last = entries.last, offset <= last.offset { return false }
        if let committable, offset < committable { return false }
        entries.append(Entry(offset: offset, finished: false, began: now))
        return true
    }

    /// Records that `offset` is finished (its outcome is durable). Returns the new offset to store
    /// when the finished prefix advanced, nil otherwise (or when `offset` is unknown).
    public mutating func finish(_ offset: Int64) -> Int64? {
        guard let index = index(of: offset), !entries[index].finished else { return nil }
        entries[index].finished = true
        var advancedTo: Int64?
        while let first = entries.first, first.finished {
            entries.removeFirst()
            advancedTo = first.offset + 1
        }
        if let advancedTo { committable = advancedTo }
        return advancedTo
    }

    /// Forgets every in-flight entry (partition revoked or reset); keeps nothing.
    public mutating func reset() {
        entries.removeAll()
        committable = nil
    }

    private func index(of offset: Int64) -> Int? {
        var low = 0
        var high = entries.count - 1
        while low <= high {
            let mid = (low + high) / 2
            let value = entries[mid].offset
            if value == offset { return mid }
            if value < offset { low = mid + 1 } else { high = mid - 1 }
        }
        return nil
    }
}
