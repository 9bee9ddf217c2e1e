#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a lock: `withLock` runs its body with exclusive access.
///
/// callpush uses this instead of `Synchronization.Mutex` so that ThreadSanitizer can check the
/// code: on Swift 6.3 / Linux, `Mutex` locks with a futex inside the uninstrumented runtime, and
/// TSan reports a race on every contended `withLock` (an 8-line program shows it; see
/// docs/reliability.md, "Sanitizers"). A `pthread_mutex_t` is intercepted by TSan, and uncontended
/// it costs about the same.
public final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` holding the lock. Do not call back into the same lock from `body`.
    @inlinable
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body(&storage)
    }

    @usableFromInline
    var storage: Value {
        _read { yield value }
        _modify { yield &value }
    }

    @usableFromInline
    func lock() { pthread_mutex_lock(mutex) }

    @usableFromInline
    func unlock() { pthread_mutex_unlock(mutex) }
}
