/// A request the poll thread carries out between polls, so that every assignment change
/// happens on that thread, in order with the messages it collects.
struct ConsumerCommand {
    enum Kind {
        case assign([KafkaPartitionAssignment])
        case seek(KafkaTopicPartition, offset: Int64)
        case pause([KafkaTopicPartition])
        case resume([KafkaTopicPartition])
    }
    var kind: Kind
    var reply: CheckedContinuation<Result<Void, KafkaError>, Never>
}

/// Pending commands; `closed` once the poll thread stopped taking them.
struct ConsumerCommandQueue {
    var closed = false
    var pending: [ConsumerCommand] = []
}

extension KafkaConsumer {
    /// Manual mode: replaces the assignment with `assignments` (each at its start position).
    /// Buffered messages of partitions no longer assigned are dropped.
    ///
    /// - Throws: ``KafkaError/Code/invalidUsage`` in group mode; a librdkafka error if rejected.
    public func assign(_ assignments: [KafkaPartitionAssignment]) async throws(KafkaError) {
        guard case .manual = configuration.mode else {
            throw KafkaError(code: .invalidUsage, message: "assign is only available in manual mode")
        }
        await loadMetadata(topics: Set(assignments.map(\.topicPartition.topic)))
        try await submit(.assign(assignments))
    }

    /// Asks the cluster for the metadata of `topics` (bounded, on a dedicated thread), so that
    /// partitions assigned next know their leader at once. Without it librdkafka 2.0.2 finds
    /// no leader for a freshly assigned partition of an unknown topic and retries its offset
    /// lookup only after a fixed 500 ms. Failures are ignored: librdkafka keeps retrying.
    private func loadMetadata(topics: Set<String>) async {
        guard !topics.isEmpty, handleGuard.enter() else { return }
        let handle = UncheckedHandle(client.handle)
        let timeoutMs = Int32(clamping: min(configuration.closeTimeout, .seconds(5)).milliseconds)
        await BlockingCall.run("kafka-consumer.metadata") {
            RDKafkaConsumerCalls.loadMetadata(handle.pointer, topics: topics, timeoutMs: timeoutMs)
        }
        handleGuard.leave()
    }

    /// Moves the position of an assigned partition: the next message delivered from it has
    /// `offset`. Messages of that partition already buffered are dropped.
    public func seek(topic: String, partition: Int32, offset: Int64) async throws(KafkaError) {
        try await submit(.seek(KafkaTopicPartition(topic: topic, partition: partition), offset: offset))
    }

    /// Stops fetching from `partitions` until ``resume(_:)`` (kept across rebalances while assigned).
    /// Messages already buffered for them may still be delivered.
    public func pause(_ partitions: [KafkaTopicPartition]) async throws(KafkaError) {
        try await submit(.pause(partitions))
    }

    /// Resumes fetching from `partitions` paused with ``pause(_:)``.
    public func resume(_ partitions: [KafkaTopicPartition]) async throws(KafkaError) {
        try await submit(.resume(partitions))
    }

    private func submit(_ kind: ConsumerCommand.Kind) async throws(KafkaError) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, KafkaError>, Never>) in
            let accepted = commands.withLock { queue -> Bool in
                guard !queue.closed else { return false }
                queue.pending.append(ConsumerCommand(kind: kind, reply: continuation))
                return true
            }
            if accepted {
                wakePollThread()
            } else {
                continuation.resume(returning: .failure(.shutdown("consumer")))
            }
        }
        try result.get()
    }

    /// Poll thread: carries out pending commands.
    func runCommands() {
        let pending = commands.withLock { queue -> [ConsumerCommand] in
            defer { queue.pending = [] }
            return queue.pending
        }
        guard !pending.isEmpty else { return }
        flushPending()
        for command in pending {
            command.reply.resume(returning: apply(command.kind))
        }
        pollContext.pendingEpoch = state.withLock { $0.epoch }
    }

    /// Poll thread, at the end: refuse further commands.
    func failCommands() {
        let pending = commands.withLock { queue -> [ConsumerCommand] in
            queue.closed = true
            defer { queue.pending = [] }
            return queue.pending
        }
        for command in pending { command.reply.resume(returning: .failure(.shutdown("consumer"))) }
    }

    private func apply(_ kind: ConsumerCommand.Kind) -> Result<Void, KafkaError> {
        let handle = client.handle
        switch kind {
        case .assign(let assignments):
            let list = RDKafkaConsumerCalls.assignmentList(assignments)
            let partitions = assignments.map(\.topicPartition)
            state.withLock { state in
                state.replaceAssignment(partitions)
                epochMirror.store(state.epoch, ordering: .releasing)
            }
            let failure = RDKafkaConsumerCalls.assign(handle, list)
            syncPauses()
            if let failure { return .failure(failure) }
            return .success(())
        case .seek(let partition, let offset):
            state.withLock { state in
                state.invalidate(partition)
                epochMirror.store(state.epoch, ordering: .releasing)
            }
            if let failure = RDKafkaConsumerCalls.seek(handle, partition, offset: offset) { return .failure(failure) }
            return .success(())
        case .pause(let partitions):
            state.withLock { $0.setUserPaused(partitions, paused: true) }
            syncPauses()
            return .success(())
        case .resume(let partitions):
            state.withLock { $0.setUserPaused(partitions, paused: false) }
            syncPauses()
            return .success(())
        }
    }
}
