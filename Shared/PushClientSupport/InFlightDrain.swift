import Locking
import NIOCore

/// The shutdown bookkeeping both push clients share: whether new work is taken, how much is in
/// flight, the one waiter of a graceful drain, and whether shutdown already ran. A value-type
/// state machine; the client keeps it behind its own lock (with whatever else that lock guards).
public struct InFlightDrain: Sendable {
    /// Whether new work is taken (false once shutdown began).
    public private(set) var accepting = true
    /// Work begun and not yet ended.
    public private(set) var inFlight = 0
    private var waiter: CheckedContinuation<Void, Never>?
    private var shutDown = false

    public init() {}

    /// Stops taking work; returns whether it was still taking it (false: a shutdown already began).
    public mutating func stopAccepting() -> Bool {
        defer { accepting = false }
        return accepting
    }

    /// Counts one more piece of work in flight; false (nothing counted) once shutdown began.
    public mutating func begin() -> Bool {
        guard accepting else { return false }
        inFlight += 1
        return true
    }

    /// Counts one piece of work fewer; returns the drain's waiter when this was the last one
    /// during shutdown (the caller resumes it outside the lock).
    public mutating func end() -> CheckedContinuation<Void, Never>? {
        inFlight -= 1
        guard !accepting, inFlight == 0 else { return nil }
        return takeWaiter()
    }

    /// Marks shutdown as done; true only the first time (so connections are closed once).
    public mutating func markShutDown() -> Bool {
        defer { shutDown = true }
        return !shutDown
    }

    /// Parks `continuation` until the work in flight ends; false when it should resume now
    /// (nothing in flight, or another drain already waits).
    mutating func park(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
        if inFlight == 0 || waiter != nil { return false }
        waiter = continuation
        return true
    }

    mutating func takeWaiter() -> CheckedContinuation<Void, Never>? {
        defer { waiter = nil }
        return waiter
    }
}

extension Locked {
    /// Waits until the work in flight counted by the ``InFlightDrain`` at `drain` ends, or
    /// `timeout` passes (a timer on `loop` then resumes the wait).
    public func waitForDrain(_ drain: WritableKeyPath<Value, InFlightDrain> & Sendable, timeout: Duration, on loop: any EventLoop) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            guard withLock({ $0[keyPath: drain].park(continuation) }) else {
                continuation.resume()
                return
            }
            loop.scheduleTask(in: TimeAmount(timeout)) { [self] in
                withLock { $0[keyPath: drain].takeWaiter() }?.resume()
            }
        }
    }
}
