import NIOCore
import Testing

@testable import APNs

@Suite struct APNSPoolStateMachineTests {
    typealias Machine = APNSPoolStateMachine<String, Int>

    func leaseID(_ decision: Machine.LeaseDecision) -> Int? {
        if case .leased(_, let id) = decision { return id }
        return nil
    }

    /// A pool of one connection (id 1, `c1`) that is up and announced `maxStreams`, with room for
    /// 10 waiters.
    func connectedPool(maxStreams: Int, now: NIODeadline = .now()) -> (Machine, Machine.Actions) {
        var machine = Machine(targetConnections: 1, maxQueued: 10)
        var actions = Machine.Actions()
        _ = machine.lease(now: now, actions: &actions)
        machine.connected(id: 1, connection: "c1", maxStreams: maxStreams, actions: &actions)
        return (machine, actions)
    }

    /// A pool of two connections (ids 1 and 2, `c1` and `c2`), both up with `maxStreams`, room for 10 waiters.
    func twoConnectedPools(maxStreams: Int) -> (Machine, Machine.Actions) {
        var machine = Machine(targetConnections: 2, maxQueued: 10)
        var actions = Machine.Actions()
        _ = machine.lease(now: .now(), actions: &actions)
        machine.connected(id: 1, connection: "c1", maxStreams: maxStreams, actions: &actions)
        machine.connected(id: 2, connection: "c2", maxStreams: maxStreams, actions: &actions)
        return (machine, actions)
    }

    @Test func opensTheConfiguredNumberOfConnectionsAndNeverExceedsMaxStreams() {
        var machine = Machine(targetConnections: 2, maxQueued: 100)
        var actions = Machine.Actions()
        guard case .wait = machine.lease(now: .now(), actions: &actions) else { Issue.record("expected wait"); return }
        #expect(actions.connect == [1, 2])

        actions = .init()
        machine.connected(id: 1, connection: "c1", maxStreams: 2, actions: &actions)
        machine.connected(id: 2, connection: "c2", maxStreams: 1, actions: &actions)
        var leased: [Int] = []
        for _ in 0..<3 {
            if let id = leaseID(machine.lease(now: .now(), actions: &actions)) { leased.append(id) }
        }
        #expect(leased.sorted() == [1, 1, 2])
        guard case .wait = machine.lease(now: .now(), actions: &actions) else { Issue.record("4th must wait"); return }

        machine.enqueue(7, id: 7, now: .now(), actions: &actions)
        #expect(actions.resume.isEmpty)
        machine.release(connectionID: 2, actions: &actions)
        #expect(actions.resume.count == 1)
        #expect(actions.resume.first?.0 == 7)
    }

    /// Load is spread over the connections (as Apple advises): each stream goes to the least-loaded ready one; a
    /// draining one is passed over.
    @Test func streamsGoToTheLeastLoadedReadyConnection() {
        var (machine, actions) = twoConnectedPools(maxStreams: 3)
        func lease() -> Int? { leaseID(machine.lease(now: .now(), actions: &actions)) }
        #expect([lease(), lease(), lease(), lease()] == [1, 2, 1, 2])
        machine.release(connectionID: 1, actions: &actions)
        #expect(lease() == 1, "the one with fewer streams in flight")
        machine.answered(id: 1)
        machine.draining(id: 1, error: APNSError(.connectFailed, "x"), now: .now(), backoff: { _ in .seconds(5) }, actions: &actions)
        #expect(lease() == 2, "a draining connection takes no new stream")
        guard case .wait = machine.lease(now: .now(), actions: &actions) else { Issue.record("full or draining: wait"); return }
    }

    @Test func queueIsBoundedAndWaitersTimeOut() {
        var machine = Machine(targetConnections: 1, maxQueued: 1)
        var actions = Machine.Actions()
        _ = machine.lease(now: .now(), actions: &actions)
        machine.enqueue(1, id: 1, now: .now(), actions: &actions)
        machine.enqueue(2, id: 2, now: .now(), actions: &actions)
        #expect(actions.resume.count == 1)
        if case .failure(let error)? = actions.resume.first?.1 { #expect(error.code == .queueFull) } else { Issue.record("queue-full expected") }
        let timedOut = machine.waiterTimedOut(id: 1)
        #expect(timedOut?.0 == 1)
        #expect(timedOut?.1.code == .queueTimeout)
        #expect(timedOut?.1.wasNotSent == true)
        #expect(machine.waiterTimedOut(id: 1) == nil)  // exactly once
    }

    @Test func connectFailureFailsWaitersWithTheCauseAndBacksOff() {
        var machine = Machine(targetConnections: 1, maxQueued: 10)
        var actions = Machine.Actions()
        let now = NIODeadline.now()
        _ = machine.lease(now: now, actions: &actions)
        machine.enqueue(1, id: 1, now: now, actions: &actions)
        actions = .init()
        machine.connectFailed(id: 1, error: APNSError(.tlsFailure, "bad cert"), now: now, backoff: { _ in .seconds(5) }, actions: &actions)
        #expect(actions.resume.count == 1)
        if case .failure(let error)? = actions.resume.first?.1 { #expect(error.code == .tlsFailure) }

        // During backoff: fail fast, no connect storm.
        actions = .init()
        guard case .fail(let error) = machine.lease(now: now + .seconds(1), actions: &actions) else { Issue.record("expected fail"); return }
        #expect(error.code == .tlsFailure)
        #expect(actions.connect.isEmpty)

        // After backoff: try again.
        guard case .wait = machine.lease(now: now + .seconds(6), actions: &actions) else { Issue.record("expected wait"); return }
        #expect(actions.connect == [2])
    }

    @Test func goAwayDrainsTheConnectionAndOpensAReplacement() {
        var (machine, actions) = connectedPool(maxStreams: 10)
        #expect(leaseID(machine.lease(now: .now(), actions: &actions)) == 1)
        machine.answered(id: 1)
        actions = .init()
        machine.draining(id: 1, error: APNSError(.connectFailed, "x"), now: .now(), backoff: { _ in .seconds(5) }, actions: &actions)
        #expect(actions.close.isEmpty)  // one stream still in flight: let it finish
        #expect(actions.connect == [2])  // a connection that served is replaced at once, no backoff

        guard case .wait = machine.lease(now: .now(), actions: &actions) else { Issue.record("no new streams on a draining connection"); return }
        #expect(actions.connect == [2])
        machine.release(connectionID: 1, actions: &actions)
        #expect(actions.close == ["c1"])
    }

    @Test func serverLoweringMaxStreamsIsHonoured() {
        var (machine, actions) = connectedPool(maxStreams: 1)
        #expect(leaseID(machine.lease(now: .now(), actions: &actions)) == 1)
        guard case .wait = machine.lease(now: .now(), actions: &actions) else { Issue.record("limit 1"); return }
        machine.enqueue(5, id: 5, now: .now(), actions: &actions)
        actions = .init()
        machine.maxStreamsChanged(id: 1, maxStreams: 3, actions: &actions)
        #expect(actions.resume.map(\.0) == [5])
    }

    @Test func shutdownFailsWaitersAndClosesConnections() {
        var (machine, actions) = connectedPool(maxStreams: 0)
        machine.enqueue(3, id: 3, now: .now(), actions: &actions)
        actions = .init()
        machine.shutdown(actions: &actions)
        #expect(actions.close == ["c1"])
        if case .failure(let error)? = actions.resume.first?.1 { #expect(error.code == .shuttingDown) } else { Issue.record("waiter must fail") }
        guard case .fail = machine.lease(now: .now(), actions: &actions) else { Issue.record("no lease after shutdown"); return }
    }

    @Test func aConnectionTurnedAwayBeforeAnsweringCountsAsAFailedConnect() {
        let now = NIODeadline.now()
        var (machine, actions) = connectedPool(maxStreams: 10, now: now)
        #expect(leaseID(machine.lease(now: now, actions: &actions)) == 1)
        // GOAWAY (last-stream-id 0, BadCertificateEnvironment) on the first request: nothing was ever answered.
        let turnedAway = APNSError(.connectFailed, "GOAWAY", reason: .badCertificateEnvironment)
        actions = .init()
        machine.draining(id: 1, error: turnedAway, now: now, backoff: { _ in .seconds(5) }, actions: &actions)
        #expect(actions.connect.isEmpty)
        machine.release(connectionID: 1, actions: &actions)
        machine.closed(id: 1, error: APNSError(.connectFailed, "closed"), now: now, backoff: { _ in .seconds(5) }, actions: &actions)
        #expect(actions.connect.isEmpty)
        // During the backoff: no reconnect, pushes fail fast with Apple's reason.
        guard case .fail(let error) = machine.lease(now: now + .seconds(1), actions: &actions) else { Issue.record("expected fail"); return }
        #expect(error.reason == .badCertificateEnvironment)
        #expect(actions.connect.isEmpty)
        #expect(machine.connectAttempts == 1)
        guard case .wait = machine.lease(now: now + .seconds(6), actions: &actions) else { Issue.record("expected wait"); return }
        #expect(actions.connect == [2])
        // Only an answer resets the backoff: the second refusal backs off longer (failure count 2).
        var asked: [Int] = []
        machine.connected(id: 2, connection: "c2", maxStreams: 10, actions: &actions)
        _ = machine.lease(now: now + .seconds(6), actions: &actions)
        machine.draining(id: 2, error: turnedAway, now: now + .seconds(6), backoff: { asked.append($0); return .seconds(5) }, actions: &actions)
        #expect(asked == [2])
        machine.answered(id: 2)
        guard case .wait = machine.lease(now: now + .seconds(7), actions: &actions) else { Issue.record("an answer ends the backoff"); return }
    }

    @Test func aConnectionClosedOrUnusedIsNotCountedAsAFailureAndAClosingOneIsNotLeased() {
        var (machine, actions) = twoConnectedPools(maxStreams: 10)
        // c2 was never leased: the server closing it is not a failed connect.
        actions = .init()
        machine.closed(id: 2, error: APNSError(.connectFailed, "closed"), now: .now(), backoff: { _ in .seconds(60) }, actions: &actions)
        guard case .leased(_, 1) = machine.lease(now: .now(), actions: &actions) else { Issue.record("c1 serves"); return }
        #expect(actions.connect == [3])
        machine.connected(id: 3, connection: "c3", maxStreams: 10, actions: &actions)
        // c1 decides to close (a dead path): from then on every lease goes to c3.
        machine.answered(id: 1)
        machine.draining(id: 1, error: APNSError(.connectionLost, "no answer to PING"), now: .now(), backoff: { _ in .seconds(60) }, actions: &actions)
        for _ in 0..<5 {
            guard case .leased(_, 3) = machine.lease(now: .now(), actions: &actions) else { Issue.record("only c3 may be leased"); return }
        }
    }
}
