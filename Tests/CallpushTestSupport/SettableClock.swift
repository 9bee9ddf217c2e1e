import Foundation
import Locking

/// A wall clock the test moves by hand (JWT ages, token renewal), passed as `now: clock.now`.
public final class SettableClock: Sendable {
    private let current: Locked<Date>

    /// A clock showing `start`.
    public init(_ start: Date = Date()) {
        current = Locked(start)
    }

    /// The time the clock shows.
    public func now() -> Date { current.withLock { $0 } }

    /// Moves the clock forward by `seconds`.
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }
}
