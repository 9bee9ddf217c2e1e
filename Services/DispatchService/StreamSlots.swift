import Locking

/// Counts open SSE streams per API key and in all, refusing one beyond either cap.
final class StreamSlots: Sendable {
    private struct State {
        var perKey: [String: Int] = [:]
        var total = 0
    }

    let perKeyLimit: Int
    let totalLimit: Int
    private let state = Locked(State())

    init(perKey: Int, total: Int) {
        perKeyLimit = perKey
        totalLimit = total
    }

    /// Takes a slot for `key`; false when the key or the instance is at its cap.
    func acquire(_ key: String) -> Bool {
        state.withLock { state in
            guard state.total < totalLimit, state.perKey[key, default: 0] < perKeyLimit else { return false }
            state.total += 1
            state.perKey[key, default: 0] += 1
            return true
        }
    }

    func release(_ key: String) {
        state.withLock { state in
            state.total -= 1
            state.perKey[key, default: 1] -= 1
            if state.perKey[key] == 0 { state.perKey[key] = nil }
        }
    }

    /// Streams open now.
    var openCount: Int { state.withLock { $0.total } }

    /// Whether the instance-wide cap is reached.
    var isFull: Bool { state.withLock { $0.total >= totalLimit } }
}

/// Admits one log line per key and interval; the lines held back in between are counted and
/// reported with the next admitted one (so a flood costs one line per interval, not one per request).
final class LogThrottle: Sendable {
    private struct Slot {
        var last: Double
        var suppressed: Int
    }

    private let interval: Double
    private let now: @Sendable () -> Double
    private let slots = Locked<[String: Slot]>([:])

    init(interval: Duration, now: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds) {
        self.interval = interval.inSeconds
        self.now = now
    }

    /// The number of lines held back since the last admitted one, or nil to hold this one back too.
    func admit(_ key: String) -> Int? {
        let time = now()
        return slots.withLock { slots -> Int? in
            if var slot = slots[key] {
                guard time - slot.last >= interval else {
                    slot.suppressed += 1
                    slots[key] = slot
                    return nil
                }
                slots[key] = Slot(last: time, suppressed: 0)
                return slot.suppressed
            }
            slots[key] = Slot(last: time, suppressed: 0)
            return 0
        }
    }
}
