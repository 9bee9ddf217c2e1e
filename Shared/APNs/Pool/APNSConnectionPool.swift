import Logging
import NIOCore
import NIOSSL
import Synchronization
import Locking

/// The connections to one endpoint for one credential (one TLS identity), with stream accounting.
///
/// Requests lease a stream (never more than the server's SETTINGS_MAX_CONCURRENT_STREAMS per
/// connection), wait in a bounded queue up to their deadline when none is free, and release it when done.
final class APNSConnectionPool: APNSConnectionDelegate, Sendable {
    typealias Waiter = CheckedContinuation<Result<(APNSConnection, Int), APNSError>, Never>
    typealias StateMachine = APNSPoolStateMachine<APNSConnection, Waiter>

    let endpoint: APNSEndpoint
    let name: String
    private let tlsContext: NIOSSLContext
    private let group: any EventLoopGroup
    private let configuration: APNSClientConfiguration
    private let reconnectBackoff: Backoff
    private let logger: Logger
    private let state: Locked<StateMachine>
    private let waiterIDs = Atomic<Int>(0)

    init(
        name: String, endpoint: APNSEndpoint, tlsContext: NIOSSLContext, group: any EventLoopGroup,
        configuration: APNSClientConfiguration, logger: Logger
    ) {
        self.name = name
        self.endpoint = endpoint
        self.tlsContext = tlsContext
        self.group = group
        self.configuration = configuration
        self.reconnectBackoff = Backoff(base: configuration.reconnectInitialBackoff, cap: configuration.reconnectMaximumBackoff)
        var logger = logger
        logger[metadataKey: "apns.pool"] = "\(name)"
        logger[metadataKey: "apns.endpoint"] = "\(endpoint)"
        self.logger = logger
        self.state = Locked(
            StateMachine(
                targetConnections: configuration.connectionsPerPool,
                maxQueued: configuration.maxQueuedRequestsPerPool))
    }

    /// A leased stream slot on a connection; give it back with ``release(_:)``.
    struct Lease: Sendable {
        let connection: APNSConnection
        let connectionID: Int
    }

    /// Leases a stream, waiting (bounded by `deadline`) if every connection is at its stream limit.
    func lease(deadline: NIODeadline) async -> Result<Lease, APNSError> {
        if let now = leaseNow() { return now }
        let waiterID = waiterIDs.wrappingAdd(1, ordering: .relaxed).newValue
        let result = await withCheckedContinuation { (continuation: Waiter) in
            let actions = state.withLock { machine in
                var actions = StateMachine.Actions()
                machine.enqueue(continuation, id: waiterID, now: .now(), actions: &actions)
                return actions
            }
            run(actions)
            group.any().scheduleTask(deadline: deadline) { [self] in
                if let (waiter, error) = state.withLock({ $0.waiterTimedOut(id: waiterID) }) {
                    waiter.resume(returning: .failure(error))
                }
            }
        }
        return result.map { Lease(connection: $0.0, connectionID: $0.1) }
    }

    /// A stream at once, or why there is none; nil when the request would have to wait for one.
    func leaseNow() -> Result<Lease, APNSError>? {
        let (decision, actions) = state.withLock { machine in
            var actions = StateMachine.Actions()
            let decision = machine.lease(now: .now(), actions: &actions)
            return (decision, actions)
        }
        run(actions)
        switch decision {
        case .leased(let connection, let id): return .success(Lease(connection: connection, connectionID: id))
        case .fail(let error): return .failure(error)
        case .wait: return nil
        }
    }

    /// Stops leasing the connection and retires it gracefully (the server answered `IdleTimeout`).
    func retire(_ lease: Lease) {
        let actions = state.withLock { machine in
            var actions = StateMachine.Actions()
            machine.retire(id: lease.connectionID, now: .now(), actions: &actions)
            return actions
        }
        run(actions)
    }

    /// Returns a stream slot.
    func release(_ lease: Lease) {
        let actions = state.withLock { machine in
            var actions = StateMachine.Actions()
            machine.release(connectionID: lease.connectionID, actions: &actions)
            return actions
        }
        run(actions)
    }

    /// Fails waiters, closes every connection (in-flight streams end with `connectionLost`).
    func shutdown() async {
        var actions = state.withLock { machine in
            var actions = StateMachine.Actions()
            machine.shutdown(actions: &actions)
            return actions
        }
        let closes = actions.close
        actions.close = []
        run(actions)
        for connection in closes {
            try? await connection.close().get()
        }
    }

    /// Current number of connections (any state), for tests and metrics.
    var connectionCount: Int { state.withLock { $0.entries.count } }

    /// Connections started since creation (each failed connect followed by a retry counts).
    var connectAttempts: Int { state.withLock { $0.connectAttempts } }

    // MARK: - Connection events

    func connectionMaxStreamsChanged(id: Int, maxStreams: Int) {
        let actions = state.withLock { machine in
            var actions = StateMachine.Actions()
            machine.maxStreamsChanged(id: id, maxStreams: maxStreams, actions: &actions)
            return actions
        }
        run(actions)
    }

    func connectionAnswered(id: Int) {
        state.withLock { $0.answered(id: id) }
    }

    func connectionDraining(id: Int, goAway: APNSGoAway?, error: APNSError?) {
        if let goAway {
            logger.info(
                "APNs sent GOAWAY",
                metadata: [
                    "apns.connection": "\(id)", "apns.last_stream": "\(goAway.lastStreamID)",
                    "apns.error_code": "\(goAway.errorCode)", "apns.reason": "\(goAway.reason ?? "-")",
                ])
        } else if let error {
            logger.info("closing an APNs connection", metadata: ["apns.connection": "\(id)", "apns.error": "\(error)"])
        }
        let cause = error ?? Self.turnedAway(goAway)
        let actions = state.withLock { machine in
            var actions = StateMachine.Actions()
            machine.draining(id: id, error: cause, now: .now(), backoff: backoffDelay(failures:), actions: &actions)
            return actions
        }
        run(actions)
    }

    func connectionClosed(id: Int, error: APNSError?) {
        logger.debug("APNs connection closed", metadata: ["apns.connection": "\(id)", "apns.error": "\(error.map { "\($0)" } ?? "-")"])
        let actions = state.withLock { machine in
            var actions = StateMachine.Actions()
            machine.closed(id: id, error: error ?? Self.turnedAway(nil), now: .now(), backoff: backoffDelay(failures:), actions: &actions)
            return actions
        }
        run(actions)
    }

    /// What a connection that APNs closed before answering anything on it counts as: a failed connect, with
    /// Apple's reason when the GOAWAY gave one (pushes failing fast meanwhile then carry that reason).
    static func turnedAway(_ goAway: APNSGoAway?) -> APNSError {
        guard let goAway else {
            return APNSError(.connectFailed, "APNs closed the connection before answering a request")
        }
        return APNSError(
            .connectFailed, "APNs sent GOAWAY (\(goAway.errorCode), \(goAway.reason ?? "no reason")) before answering a request",
            reason: goAway.reason.map(APNSReason.init(rawValue:)))
    }

    // MARK: - Actions

    private func run(_ actions: StateMachine.Actions) {
        if actions.isEmpty { return }
        for (waiter, result) in actions.resume {
            waiter.resume(returning: result)
        }
        for connection in actions.close {
            connection.channel.close(promise: nil)
        }
        for connection in actions.retire {
            connection.retire()
        }
        for id in actions.connect {
            startConnecting(id: id)
        }
    }

    private func startConnecting(id: Int) {
        logger.debug("connecting to APNs", metadata: ["apns.connection": "\(id)"])
        APNSConnection.connect(
            id: id, endpoint: endpoint, tlsContext: tlsContext, eventLoop: group.next(),
            configuration: configuration, delegate: self
        ).whenComplete { [self] result in
            let actions: StateMachine.Actions
            switch result {
            case .success(let (connection, maxStreams)):
                logger.debug("connected to APNs", metadata: ["apns.connection": "\(id)", "apns.max_streams": "\(maxStreams)"])
                actions = state.withLock { machine in
                    var actions = StateMachine.Actions()
                    machine.connected(id: id, connection: connection, maxStreams: maxStreams, actions: &actions)
                    return actions
                }
            case .failure(let error):
                let error = APNSConnectionHandler.classify(error)
                logger.warning("connecting to APNs failed", metadata: ["apns.connection": "\(id)", "apns.error": "\(error)"])
                actions = state.withLock { machine in
                    var actions = StateMachine.Actions()
                    machine.connectFailed(id: id, error: error, now: .now(), backoff: backoffDelay(failures:), actions: &actions)
                    return actions
                }
            }
            run(actions)
        }
    }

    /// The wait before reconnecting after `failures` consecutive failed connections.
    private func backoffDelay(failures: Int) -> TimeAmount {
        TimeAmount(reconnectBackoff.delay(afterFailures: failures))
    }
}
