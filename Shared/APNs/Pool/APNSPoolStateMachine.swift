import NIOCore

/// The stream accounting of one pool: which connections exist, how many streams each may carry
/// (the server's SETTINGS_MAX_CONCURRENT_STREAMS), how many are in use, and who waits for one.
///
/// Pure value type behind the pool's lock; methods return what to do, the pool does the I/O.
/// `Waiter` is generic so the logic is testable without continuations.
struct APNSPoolStateMachine<Connection, Waiter> {
    enum ConnectionState: Equatable {
        case connecting
        case ready
        /// GOAWAY received or closing: no new streams; closed once idle.
        case draining
    }

    struct Entry {
        let id: Int
        var connection: Connection?
        var state: ConnectionState
        var maxStreams: Int
        var inUse: Int
        /// A request was handed to it.
        var leased = false
        /// It answered a request: the server accepts this client.
        var answered = false
    }

    enum LeaseDecision {
        case leased(Connection, id: Int)
        case wait
        case fail(APNSError)
    }

    /// Actions for the pool to run outside the lock.
    struct Actions {
        var connect: [Int] = []
        var resume: [(Waiter, Result<(Connection, Int), APNSError>)] = []
        var close: [Connection] = []
        /// Connections to retire gracefully (GOAWAY, finish the streams in flight, close).
        var retire: [Connection] = []

        var isEmpty: Bool { connect.isEmpty && resume.isEmpty && close.isEmpty && retire.isEmpty }
    }

    let targetConnections: Int
    let maxQueued: Int
    private(set) var entries: [Entry] = []
    private var waiterOrder = CircularBuffer<Int>()
    private var waiters: [Int: Waiter] = [:]
    private var nextConnectionID = 1
    private var consecutiveFailures = 0
    private var backoffUntil: NIODeadline?
    private var lastConnectError: APNSError?
    private(set) var isShutdown = false
    /// Connections started since creation (for tests and metrics).
    private(set) var connectAttempts = 0

    init(targetConnections: Int, maxQueued: Int) {
        self.targetConnections = targetConnections
        self.maxQueued = maxQueued
    }

    var waiterCount: Int { waiters.count }

    /// Fast path: a stream on the least-loaded ready connection, or `.wait` (with connects to start).
    mutating func lease(now: NIODeadline, actions: inout Actions) -> LeaseDecision {
        if isShutdown { return .fail(APNSError(.shuttingDown, "the APNs client is shutting down")) }
        ensureConnections(now: now, actions: &actions)
        if let decision = takeStream() { return decision }
        if !hasLiveConnection, let lastConnectError {
            // Connecting failed and we are backing off: fail fast instead of piling up requests.
            return .fail(lastConnectError)
        }
        return .wait
    }

    /// Queues a waiter (after `lease` said `.wait`); it may be served at once if capacity appeared.
    mutating func enqueue(_ waiter: Waiter, id: Int, now: NIODeadline, actions: inout Actions) {
        switch lease(now: now, actions: &actions) {
        case .leased(let connection, let connectionID):
            actions.resume.append((waiter, .success((connection, connectionID))))
        case .fail(let error):
            actions.resume.append((waiter, .failure(error)))
        case .wait:
            if waiters.count >= maxQueued {
                actions.resume.append((waiter, .failure(APNSError(.queueFull, "\(maxQueued) requests already wait for a stream"))))
            } else {
                waiters[id] = waiter
                waiterOrder.append(id)
            }
        }
    }

    /// A waiter's deadline passed: it fails with the last connect error if any, else with `queue-timeout`
    /// (never written, so certainly not delivered).
    mutating func waiterTimedOut(id: Int) -> (Waiter, APNSError)? {
        guard let waiter = waiters.removeValue(forKey: id) else { return nil }
        let error = lastConnectError ?? APNSError(.queueTimeout, "no HTTP/2 stream became free before the deadline; the push was not sent")
        return (waiter, error)
    }

    /// A stream finished.
    mutating func release(connectionID: Int, actions: inout Actions) {
        guard let index = entries.firstIndex(where: { $0.id == connectionID }) else { return }
        entries[index].inUse -= 1
        if entries[index].state == .draining, entries[index].inUse == 0, let connection = entries[index].connection {
            actions.close.append(connection)
        }
        serveWaiters(actions: &actions)
    }

    mutating func connected(id: Int, connection: Connection, maxStreams: Int, actions: inout Actions) {
        guard let index = entries.firstIndex(where: { $0.id == id }) else {
            actions.close.append(connection)
            return
        }
        // Reconnect backoff resets only once the server answers on it (`answered`): APNs turns a certificate for
        // the wrong environment away after the handshake, on the first request.
        lastConnectError = nil
        entries[index].connection = connection
        if isShutdown {
            entries[index].state = .draining
            actions.close.append(connection)
            return
        }
        entries[index].state = .ready
        entries[index].maxStreams = maxStreams
        serveWaiters(actions: &actions)
    }

    /// - Parameter backoff: the delay before the next attempt, computed by the caller from `failures`.
    mutating func connectFailed(id: Int, error: APNSError, now: NIODeadline, backoff: (Int) -> TimeAmount, actions: inout Actions) {
        entries.removeAll { $0.id == id }
        recordFailure(error, now: now, backoff: backoff, actions: &actions)
    }

    /// The connection answered its first request.
    mutating func answered(id: Int) {
        guard let index = entries.firstIndex(where: { $0.id == id }) else { return }
        entries[index].answered = true
        consecutiveFailures = 0
        backoffUntil = nil
        lastConnectError = nil
    }

    mutating func maxStreamsChanged(id: Int, maxStreams: Int, actions: inout Actions) {
        guard let index = entries.firstIndex(where: { $0.id == id }) else { return }
        entries[index].maxStreams = maxStreams
        serveWaiters(actions: &actions)
    }

    /// The connection takes no new streams (GOAWAY either way, or it is closing after an error): it is never
    /// leased again, and closes once its streams are done. Turned away before it answered anything, it counts
    /// as a failed connect (`error`) for the reconnect backoff.
    mutating func draining(id: Int, error: APNSError, now: NIODeadline, backoff: (Int) -> TimeAmount, actions: inout Actions) {
        guard let index = entries.firstIndex(where: { $0.id == id }), entries[index].state != .draining else { return }
        entries[index].state = .draining
        if entries[index].inUse == 0, let connection = entries[index].connection {
            actions.close.append(connection)
        }
        if entries[index].leased, !entries[index].answered {
            recordFailure(error, now: now, backoff: backoff, actions: &actions)
        }
        // Replace a connection that served, at once (the next push should not pay for the handshake); the
        // connection that never answered is replaced when demand and the backoff allow.
        if !waiters.isEmpty || entries[index].answered { ensureConnections(now: now, actions: &actions) }
    }

    /// Retires a connection on the caller's behalf (the server answered `IdleTimeout`).
    mutating func retire(id: Int, now: NIODeadline, actions: inout Actions) {
        guard let index = entries.firstIndex(where: { $0.id == id }), entries[index].state == .ready,
            let connection = entries[index].connection
        else { return }
        entries[index].state = .draining
        actions.retire.append(connection)
        ensureConnections(now: now, actions: &actions)
    }

    mutating func closed(id: Int, error: APNSError, now: NIODeadline, backoff: (Int) -> TimeAmount, actions: inout Actions) {
        guard let index = entries.firstIndex(where: { $0.id == id }) else { return }
        let entry = entries.remove(at: index)
        if entry.state != .draining, entry.leased, !entry.answered {
            recordFailure(error, now: now, backoff: backoff, actions: &actions)
        }
        if !waiters.isEmpty || entry.answered {
            ensureConnections(now: now, actions: &actions)
            if !hasLiveConnection, let lastConnectError { failAllWaiters(lastConnectError, actions: &actions) }
        }
    }

    mutating func shutdown(actions: inout Actions) {
        isShutdown = true
        failAllWaiters(APNSError(.shuttingDown, "the APNs client is shutting down"), actions: &actions)
        for index in entries.indices {
            entries[index].state = .draining
            if let connection = entries[index].connection { actions.close.append(connection) }
        }
    }

    // MARK: - Internals

    private var hasLiveConnection: Bool {
        entries.contains { $0.state != .draining }
    }

    private mutating func takeStream() -> LeaseDecision? {
        var best: Int?
        for index in entries.indices where entries[index].state == .ready && entries[index].inUse < entries[index].maxStreams {
            if best.map({ entries[index].inUse < entries[$0].inUse }) ?? true { best = index }
        }
        guard let best, let connection = entries[best].connection else { return nil }
        entries[best].inUse += 1
        entries[best].leased = true
        return .leased(connection, id: entries[best].id)
    }

    /// A connect failed, or a connection was turned away before it answered: back off before the next attempt
    /// (exponential, `backoff` computes it from the count), and while no connection is left fail the queue now
    /// with the real cause rather than at the deadline.
    private mutating func recordFailure(_ error: APNSError, now: NIODeadline, backoff: (Int) -> TimeAmount, actions: inout Actions) {
        consecutiveFailures += 1
        lastConnectError = error
        backoffUntil = now + backoff(consecutiveFailures)
        if !hasLiveConnection { failAllWaiters(error, actions: &actions) }
    }

    private mutating func ensureConnections(now: NIODeadline, actions: inout Actions) {
        guard !isShutdown else { return }
        if let backoffUntil, now < backoffUntil { return }
        var live = entries.reduce(0) { $0 + ($1.state == .draining ? 0 : 1) }
        while live < targetConnections {
            let id = nextConnectionID
            nextConnectionID += 1
            entries.append(Entry(id: id, connection: nil, state: .connecting, maxStreams: 0, inUse: 0))
            actions.connect.append(id)
            connectAttempts += 1
            live += 1
        }
    }

    private mutating func serveWaiters(actions: inout Actions) {
        while let id = waiterOrder.first {
            guard let waiter = waiters[id] else {
                waiterOrder.removeFirst()  // timed out earlier
                continue
            }
            guard case .leased(let connection, let connectionID)? = takeStream() else { return }
            waiterOrder.removeFirst()
            waiters[id] = nil
            actions.resume.append((waiter, .success((connection, connectionID))))
        }
    }

    private mutating func failAllWaiters(_ error: APNSError, actions: inout Actions) {
        while let id = waiterOrder.popFirst() {
            if let waiter = waiters.removeValue(forKey: id) {
                actions.resume.append((waiter, .failure(error)))
            }
        }
    }
}

extension APNSPoolStateMachine: Sendable where Connection: Sendable, Waiter: Sendable {}
extension APNSPoolStateMachine.Entry: Sendable where Connection: Sendable, Waiter: Sendable {}
extension APNSPoolStateMachine.Actions: Sendable where Connection: Sendable, Waiter: Sendable {}
extension APNSPoolStateMachine.LeaseDecision: Sendable where Connection: Sendable, Waiter: Sendable {}
