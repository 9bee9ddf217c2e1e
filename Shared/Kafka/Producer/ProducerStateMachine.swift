/// The lifecycle of one librdkafka producer client and its waiting senders, kept behind a `Mutex` by
/// `ProducerClient`. Methods return what to do; resuming continuations happens outside the lock.
struct ProducerStateMachine {
    enum Lifecycle {
        case running
        /// Shutdown began; waiting for `activeSenders` to reach zero.
        case draining
        /// The poll thread is flushing / the handle is being destroyed.
        case closing
        case finished
    }

    private(set) var lifecycle: Lifecycle = .running
    /// Senders currently calling `rd_kafka_produceva` (the handle must outlive them).
    private(set) var activeSenders = 0
    /// Senders waiting for room in the full local queue.
    private var spaceWaiters: [CheckedContinuation<Void, Never>] = []
    /// Who waits for the senders to drain (the shutdown that started it).
    private var drainWaiter: CheckedContinuation<Void, Never>?
    /// Callers of `shutdown` waiting for it to complete.
    private var finishWaiters: [CheckedContinuation<Void, Never>] = []

    /// A sender wants to produce. Returns `false` when shut down.
    mutating func enterSend() -> Bool {
        guard case .running = lifecycle else { return false }
        activeSenders += 1
        return true
    }

    /// A sender stopped producing. Returns the shutdown to resume, if it was the last one.
    mutating func leaveSend() -> CheckedContinuation<Void, Never>? {
        activeSenders -= 1
        if activeSenders == 0, case .draining = lifecycle {
            defer { drainWaiter = nil }
            return drainWaiter
        }
        return nil
    }

    /// A sender waits for room. Returns `false` (resume now) if shutting down.
    mutating func waitForSpace(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
        guard case .running = lifecycle else { return false }
        spaceWaiters.append(continuation)
        return true
    }

    /// The poll thread served events (or timed out): every waiting sender retries.
    mutating func takeSpaceWaiters() -> [CheckedContinuation<Void, Never>] {
        guard !spaceWaiters.isEmpty else { return [] }
        defer { spaceWaiters.removeAll(keepingCapacity: true) }
        return spaceWaiters
    }

    enum ShutdownAction {
        /// This caller performs the shutdown; resume these waiters (they will see `draining`).
        case perform(wakeSenders: [CheckedContinuation<Void, Never>])
        /// Another caller performs it; wait for it to finish.
        case waitForOther
        /// Already done.
        case done
    }

    mutating func beginShutdown() -> ShutdownAction {
        switch lifecycle {
        case .running:
            lifecycle = .draining
            defer { spaceWaiters.removeAll() }
            return .perform(wakeSenders: spaceWaiters)
        case .draining, .closing:
            return .waitForOther
        case .finished:
            return .done
        }
    }

    /// Registers the shutdown's wait for senders; returns `false` if none are active.
    mutating func waitForDrain(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
        guard activeSenders > 0 else { return false }
        drainWaiter = continuation
        return true
    }

    mutating func closing() {
        lifecycle = .closing
    }

    /// Registers a waiter for the end of shutdown; returns `false` if already finished.
    mutating func waitForFinish(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
        if case .finished = lifecycle { return false }
        finishWaiters.append(continuation)
        return true
    }

    mutating func finished() -> [CheckedContinuation<Void, Never>] {
        lifecycle = .finished
        defer { finishWaiters.removeAll() }
        return finishWaiters
    }
}
