import Foundation
import Locking

extension KafkaConsumer: RDKafkaClientDelegate {
    /// librdkafka's rebalance callback, on the poll thread (inside `rd_kafka_consumer_poll`
    /// or `rd_kafka_consumer_close`).
    func rebalance(_ event: RDKafkaRebalance) {
        // Messages collected so far were fetched under the old assignment.
        flushPending()
        let partitions = event.partitions
        switch event.kind {
        case .assign:
            if let assignError = event.assignListed() {
                logger.error("kafka assign failed", metadata: ["kafka.error": "\(assignError)"])
            }
            let assignment = state.withLock { state in
                state.assign(partitions)
                epochMirror.store(state.epoch, ordering: .releasing)
                return state.epoch
            }
            logger.info("kafka partitions assigned", metadata: ["kafka.partitions": "\(partitions)"])
            // Until the handler returns, nothing of these partitions reaches the application: the
            // poll thread waits here (bounded), then holds them paused (see `awaitingAssignHandler`).
            let finished = runHandler("assign", timeout: configuration.assignTimeout) { [rebalanceHandler] in
                await rebalanceHandler.onAssign(partitions)
            } whenDone: { [weak self] in
                self?.assignHandlerFinished(epoch: assignment)
            }
            if !finished {
                logger.warning(
                    "kafka assign handler still running after assignTimeout; its partitions stay paused until it returns",
                    metadata: ["kafka.partitions": "\(partitions)", "kafka.timeout": "\(configuration.assignTimeout)"]
                )
            }
            // Pauses the partitions still waiting for their handler (a librdkafka pause drops what it
            // fetched for them meanwhile; they fetch again from the committed offset on resume), and
            // applies back-pressure and the application's pauses to the new assignment.
            syncPauses()
        case .revoke:
            state.withLock { state in
                state.revoke(partitions)
                epochMirror.store(state.epoch, ordering: .releasing)
            }
            let lost = event.isAssignmentLost
            logger.info("kafka partitions revoked", metadata: ["kafka.partitions": "\(partitions)", "kafka.lost": "\(lost)"])
            // Let the application finish in-flight work and store its offsets (bounded).
            if !runHandler("revoke", timeout: configuration.revokeTimeout, { [rebalanceHandler] in
                await rebalanceHandler.onRevoke(partitions)
            }) {
                logger.warning(
                    "kafka revoke handler did not finish within revokeTimeout; committing and unassigning anyway",
                    metadata: ["kafka.partitions": "\(partitions)", "kafka.timeout": "\(configuration.revokeTimeout)"]
                )
            }
            // From here on stores for these partitions fail, so nothing is stored after the commit.
            state.withLock { $0.endRevoke() }
            if !lost, case .group = configuration.mode {
                if let commitError = event.commitStored() {
                    logger.warning("kafka commit on revoke failed", metadata: ["kafka.error": "\(commitError)"])
                }
            }
            event.unassign()
            syncPauses()  // clears librdkafka's pause of the revoked partitions (it survives re-assignment)
        case .failed(let error):
            logger.error("kafka rebalance error", metadata: ["kafka.error": "\(error)"])
            state.withLock { state in
                state.revoke(Array(state.assigned.keys))
                state.endRevoke()
                epochMirror.store(state.epoch, ordering: .releasing)
            }
            event.unassign()
            syncPauses()
        }
        pollContext.pendingEpoch = state.withLock { $0.epoch }
    }

    /// Runs an application handler after the handlers before it (they run one at a time, in the
    /// order of the rebalance events, even when one outlives its bound) and blocks the poll thread
    /// until it returned or `timeout` passed. `whenDone` runs when it returned. Returns whether it
    /// returned within `timeout`.
    private func runHandler(
        _ name: String,
        timeout: Duration,
        _ body: @escaping @Sendable () async -> Void,
        whenDone: @escaping @Sendable () -> Void = {}
    ) -> Bool {
        let done = DispatchSemaphore(value: 0)
        handlerChain.withLock { last in
            let previous = last
            last = Task {
                await previous?.value
                await body()
                whenDone()
                done.signal()
            }
        }
        let seconds = timeout.inSeconds
        let finished = done.wait(timeout: .now() + seconds) == .success
        if !finished {
            logger.debug("kafka rebalance handler outlived its bound", metadata: ["kafka.handler": "\(name)"])
        }
        return finished
    }

    /// An assign handler returned (on its task): its partitions may fetch once the poll thread
    /// brought librdkafka's pauses in line, so the poll thread is woken to do it.
    private func assignHandlerFinished(epoch: Int) {
        guard state.withLock({ $0.assignHandlerFinished(epoch: epoch) }) else { return }
        pauseSyncRequested.store(true, ordering: .releasing)
        wakePollThread()
    }

    /// Poll thread: brings librdkafka's pause state in line with the assignment, the
    /// application's pauses and back-pressure (see ``ConsumerStateMachine/pauseChanges()``).
    func syncPauses() {
        let (pause, resume) = state.withLock { $0.pauseChanges() }
        setPaused(pause, paused: true)
        setPaused(resume, paused: false)
    }

    /// Pauses or resumes partitions in librdkafka (poll thread).
    ///
    /// librdkafka 2.0.2 does not wake a broker thread on resume (it may sleep up to 1 s before it
    /// fetches again; docs/kafka.md, "Fetch wake-up"), so after a resume (which librdkafka has
    /// applied when the call returns) the broker threads are woken.
    private func setPaused(_ partitions: [KafkaTopicPartition], paused: Bool) {
        guard !partitions.isEmpty else { return }
        if let error = client.setPaused(partitions, paused: paused) {
            logger.warning("kafka pause/resume failed", metadata: ["kafka.error": "\(error)"])
        }
        if !paused { client.wakeBrokerThreads() }
    }

    /// The buffer reached its bound: stop fetching (rebalances are still served).
    func pauseForBackpressure() {
        let paused = state.withLock { state -> Int? in
            guard !state.backpressurePaused else { return nil }
            state.backpressurePaused = true
            state.backpressurePauses += 1
            return state.assigned.count
        }
        guard let paused else { return }
        logger.debug("kafka consumer buffer full; pausing fetch", metadata: ["kafka.partitions": "\(paused)"])
        syncPauses()
    }

    /// The application caught up: resume fetching (except partitions it paused itself).
    func adjustBackpressure() {
        let caughtUp = state.withLock { state -> Bool in
            guard state.mayResume(configuration.bufferLimits) else { return false }
            state.backpressurePaused = false
            return true
        }
        if caughtUp { syncPauses() }
    }
}
