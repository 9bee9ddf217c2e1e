import CRdKafka
import Foundation

extension KafkaConsumer: RDKafkaClientDelegate {
    /// librdkafka's rebalance callback, on the poll thread (inside `rd_kafka_consumer_poll`
    /// or `rd_kafka_consumer_close`).
    func rebalance(_ err: rd_kafka_resp_err_t, _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        let handle = client.handle
        // Messages collected so far were fetched under the old assignment.
        flushPending()
        let partitions = RDKafkaTopicPartitionList.partitions(of: list)
        switch err {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            let assignErr = rd_kafka_assign(handle, list)
            if assignErr != RD_KAFKA_RESP_ERR_NO_ERROR {
                logger.error("kafka assign failed", metadata: ["kafka.error": "\(KafkaError(rdKafka: assignErr))"])
            }
            state.withLock { state in
                state.assign(partitions)
                epochMirror.store(state.epoch, ordering: .releasing)
            }
            forgetPausePositions()
            syncPauses()
            logger.info("kafka partitions assigned", metadata: ["kafka.partitions": "\(partitions)"])
            runHandler("assign", timeout: configuration.assignTimeout) { [rebalanceHandler] in
                await rebalanceHandler.onAssign(partitions)
            }
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            state.withLock { state in
                state.revoke(partitions)
                epochMirror.store(state.epoch, ordering: .releasing)
            }
            let lost = rd_kafka_assignment_lost(handle) != 0
            logger.info("kafka partitions revoked", metadata: ["kafka.partitions": "\(partitions)", "kafka.lost": "\(lost)"])
            // Let the application finish in-flight work and store its offsets (bounded).
            runHandler("revoke", timeout: configuration.revokeTimeout) { [rebalanceHandler] in
                await rebalanceHandler.onRevoke(partitions)
            }
            // From here on stores for these partitions fail, so nothing is stored after the commit.
            state.withLock { $0.endRevoke() }
            if !lost, case .group = configuration.mode {
                let commitErr = rd_kafka_commit(handle, nil, 0)
                if commitErr != RD_KAFKA_RESP_ERR_NO_ERROR && commitErr != RD_KAFKA_RESP_ERR__NO_OFFSET {
                    logger.warning("kafka commit on revoke failed", metadata: ["kafka.error": "\(KafkaError(rdKafka: commitErr))"])
                }
            }
            rd_kafka_assign(handle, nil)
            forgetPausePositions()
            syncPauses()  // clears librdkafka's pause of the revoked partitions (it survives re-assignment)
        default:
            logger.error("kafka rebalance error", metadata: ["kafka.error": "\(KafkaError(rdKafka: err))"])
            state.withLock { state in
                state.revoke(Array(state.assigned.keys))
                state.endRevoke()
                epochMirror.store(state.epoch, ordering: .releasing)
            }
            rd_kafka_assign(handle, nil)
            forgetPausePositions()
            syncPauses()
        }
        pollContext.pendingEpoch = state.withLock { $0.epoch }
    }

    /// Runs an application handler and blocks the poll thread until it returns or `timeout` passes.
    private func runHandler(_ name: String, timeout: Duration, _ body: @escaping @Sendable () async -> Void) {
        let done = DispatchSemaphore(value: 0)
        Task {
            await body()
            done.signal()
        }
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        if done.wait(timeout: .now() + seconds) == .timedOut {
            logger.warning(
                "kafka rebalance handler did not finish in time; continuing",
                metadata: ["kafka.handler": "\(name)", "kafka.timeout": "\(timeout)"]
            )
        }
    }

    /// Poll thread: brings librdkafka's pause state in line with the assignment, the
    /// application's pauses and back-pressure (see ``ConsumerStateMachine/pauseChanges()``).
    func syncPauses() {
        let (pause, resume) = state.withLock { $0.pauseChanges() }
        setPaused(pause, paused: true)
        setPaused(resume, paused: false)
    }

    /// Pauses or resumes partitions in librdkafka (poll thread).
    private func setPaused(_ partitions: [KafkaTopicPartition], paused: Bool) {
        guard !partitions.isEmpty else { return }
        let list = RDKafkaTopicPartitionList.make(partitions)
        let err = paused ? rd_kafka_pause_partitions(client.handle, list.pointer) : rd_kafka_resume_partitions(client.handle, list.pointer)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("kafka pause/resume failed", metadata: ["kafka.error": "\(KafkaError(rdKafka: err))"])
        } else if paused {
            rememberPositions(list)
        } else {
            wakeFetchers(partitions)
        }
    }

    /// Records where the just-paused partitions stand (`rd_kafka_position`: the offset after the
    /// last message handed to us, which is where librdkafka resumes them).
    private func rememberPositions(_ paused: RDKafkaTopicPartitionList) {
        guard rd_kafka_position(client.handle, paused.pointer) == RD_KAFKA_RESP_ERR_NO_ERROR else { return }
        for element in paused.elements where element.err == RD_KAFKA_RESP_ERR_NO_ERROR && element.offset >= 0 {
            pollContext.pausedAt[element.partition] = element.offset
        }
    }

    /// Forgets the pause positions: called on every assignment change (before `syncPauses`).
    func forgetPausePositions() {
        pollContext.pausedAt.removeAll()
    }

    /// librdkafka 2.0.2 does not wake a broker thread when partitions are resumed: one with
    /// nothing left to fetch sleeps up to 1 s before it notices, and a consumer that paused for
    /// back-pressure starves for that long (worker benchmark: 1.7k → 3.7k events/s with this). A
    /// seek does wake it ("seek done"), so each resumed partition is sought to the position it
    /// was paused at — the offset resume fetches from anyway. Only positions recorded at the pause
    /// within the current assignment are used: a partition paused, revoked and assigned again
    /// resumes without a wake-up (its position then belongs to the earlier owner's view; seeking
    /// there could skip or repeat messages).
    private func wakeFetchers(_ resumed: [KafkaTopicPartition]) {
        let seek = RDKafkaTopicPartitionList(capacity: resumed.count)
        for partition in resumed {
            guard let offset = pollContext.pausedAt.removeValue(forKey: partition) else { continue }
            seek.add(topic: partition.topic, partition: partition.partition, offset: offset)
        }
        guard seek.pointer.pointee.cnt > 0 else { return }
        if let error = rd_kafka_seek_partitions(client.handle, seek.pointer, 0) { rd_kafka_error_destroy(error) }
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
            guard state.backpressurePaused, state.bufferedCount <= configuration.maxBufferedMessages / 2 else { return false }
            state.backpressurePaused = false
            return true
        }
        if caughtUp { syncPauses() }
    }
}
