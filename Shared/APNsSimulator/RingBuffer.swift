/// A fixed-capacity FIFO that overwrites its oldest element when full.
struct RingBuffer<Element> {
    private var storage: [Element] = []
    private var head = 0
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int { storage.count }

    /// Appends; returns true if the oldest element was dropped to make room.
    @discardableResult
    mutating func append(_ element: Element) -> Bool {
        if storage.count < capacity {
            // Grow in one step up to 64k elements (no copies while filling); larger rings grow by doubling.
            if storage.isEmpty { storage.reserveCapacity(min(capacity, 1 << 16)) }
            storage.append(element)
            return false
        }
        storage[head] = element
        head = (head + 1) % capacity
        return true
    }

    mutating func removeAll() {
        storage.removeAll(keepingCapacity: false)
        head = 0
    }

    /// Oldest first.
    var elements: [Element] {
        Array(storage[head...] + storage[..<head])
    }
}
