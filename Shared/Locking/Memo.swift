/// Values made once per key and reused, e.g. a Prometheus counter per label set: looking a
/// metric up in the registry on every event builds its descriptor and validates its name and
/// help text each time, which showed in dispatch's and the worker's profiles. Keys must be
/// bounded (label values are).
public final class Memo<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private let values = Locked<[Key: Value]>([:])

    public init() {}

    /// The value for `key`, made by `make` the first time.
    public func value(for key: Key, make: () -> Value) -> Value {
        values.withLock { values in
            if let value = values[key] { return value }
            let value = make()
            values[key] = value
            return value
        }
    }
}
