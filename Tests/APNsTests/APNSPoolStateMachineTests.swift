import NIOCore
import Testing

@testable import APNs

@Suite struct APNSPoolStateMachineTests {
    typealias Machine = APNSPoolStateMachine<String, Int>

    func leaseID(_ decision: Machine.LeaseDecision) -> Int? {
        if case .leased(_, let id) = decision { return id }
        return nil
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
        var machine = Machine(targetConnections: 1, maxQueued: 10)
        var actions = Machine.Actions()
        _ = machine.lease(now: .now(), actions: &actions)
        machine.connected(id: 1, connection: "c1", maxStreams: 10, actions: &actions)
        #expect(leaseID(machine.lease(now: .now(), actions: &actions)) == 1)
        actions = .init()
        machine.goAway(id: 1, now: .now(), actions: &actions)
        #expect(actions.close.isEmpty)  // one stream still in flight: let it finish

        guard case .wait = machine.lease(now: .now(), actions: &actions) else { Issue.record("no new streams on a draining connection"); return }
        #expect(actions.connect == [2])
        machine.release(connectionID: 1, actions: &actions)
        #expect(actions.close == ["c1"])
    }

    @Test func serverLoweringMaxStreamsIsHonoured() {
        var machine = Machine(targetConnections: 1, maxQueued: 10)
        var actions = Machine.Actions()
        _ = machine.lease(now: .now(), actions: &actions)
        machine.connected(id: 1, connection: "c1", maxStreams: 1, actions: &actions)
        #expect(leaseID(machine.lease(now: .now(), actions: &actions)) == 1)
        guard case .wait = machine.lease(now: .now(), actions: &actions) else { Issue.record("limit 1"); return }
        machine.enqueue(5, id: 5, now: .now(), actions: &actions)
        actions = .init()
        machine.maxStreamsChanged(id: 1, maxStreams: 3, actions: &actions)
        #expect(actions.resume.map(\.0) == [5])
    }

    @Test func shutdownFailsWaitersAndClosesConnections() {
        var machine = Machine(targetConnections: 1, maxQueued: 10)
        var actions = Machine.Actions()
        _ = machine.lease(now: .now(), actions: &actions)
        machine.connected(id: 1, connection: "c1", maxStreams: 0, actions: &actions)
        machine.enqueue(3, id: 3, now: .now(), actions: &actions)
        actions = .init()
        machine.shutdown(actions: &actions)
        #expect(actions.close == ["c1"])
        if case .failure(let error)? = actions.resume.first?.1 { #expect(error.code == .shuttingDown) } else { Issue.record("waiter must fail") }
        guard case .fail = machine.lease(now: .now(), actions: &actions) else { Issue.record("no lease after shutdown"); return }
    }
}
