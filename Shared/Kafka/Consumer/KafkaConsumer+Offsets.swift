extension KafkaConsumer {
    /// Stores `message.offset + 1` for its partition: the message is processed. Stored
    /// offsets are committed automatically, on revoke and on close.
    ///
    /// - Throws: ``KafkaError/Code/notAssigned`` if the partition is no longer assigned
    ///   (it moved to another consumer, which will process the message again), or was revoked
    ///   and assigned again since the message was fetched (the new assignment delivers the
    ///   message again, with any earlier one left uncommitted: storing this one would skip them).
    public func storeOffset(for message: KafkaConsumerMessage) throws(KafkaError) {
        try store(topic: message.topic, partition: message.partition, offset: message.offset + 1) { $0.canStore(message) }
    }

    /// Whether `message` belongs to its partition's current assignment: false once the partition
    /// was revoked, even if it was assigned to this consumer again since (then the new assignment
    /// delivers the message again from the committed offset). An application that holds a message
    /// across an `await` checks this before it starts work whose completion stores offsets.
    public func isCurrent(_ message: KafkaConsumerMessage) -> Bool {
        state.withLock { $0.isValid(message, fetchedAt: message.fetchEpoch) }
    }

    /// Stores `offset` (the next offset to read, i.e. last processed + 1) for a partition.
    ///
    /// - Throws: ``KafkaError/Code/notAssigned`` if the partition is not assigned.
    public func store(topic: String, partition: Int32, offset: Int64) throws(KafkaError) {
        let topicPartition = KafkaTopicPartition(topic: topic, partition: partition)
        try store(topic: topic, partition: partition, offset: offset) { $0.canStore(topicPartition) }
    }

    private func store(
        topic: String, partition: Int32, offset: Int64, allowed: (ConsumerStateMachine) -> Bool
    ) throws(KafkaError) {
        guard handleGuard.enter() else { throw KafkaError.shutdown("consumer") }
        defer { handleGuard.leave() }
        let list = RDKafkaTopicPartitionList()
        list.add(topic: topic, partition: partition, offset: offset)
        let handle = client.handle
        // Checked and stored under the lock the rebalance path takes before committing, so an
        // offset is never stored for a revoked partition after its final commit.
        let failure = state.withLock { state -> Int32 in
            guard allowed(state) else { return RDKafkaOffsets.notAssigned }
            return RDKafkaOffsets.store(handle, list)
        }
        guard failure == RDKafkaOffsets.stored else {
            throw KafkaError(rdKafkaCode: failure, context: "store offset \(offset) for \(topic)[\(partition)]")
        }
    }

    /// A partition's high watermark as this consumer last learned it, without asking the broker:
    /// librdkafka updates it from every fetch response (empty ones too), the way Kafka's own
    /// consumers compute `records-lag`. `nil` until the partition's first fetch answered (not
    /// assigned, or just assigned). While fetching is paused it is not refreshed.
    ///
    /// A consumer-lag gauge should use this: ``queryWatermarks(topic:partition:timeout:)`` is a
    /// broker round trip per partition on the connection the fetches use. For a partition whose
    /// fetching is paused (``isFetchPaused(topic:partition:)``) the cached value stays where it was
    /// when the pause began; ask the broker for those partitions only.
    public func cachedHighWatermark(topic: String, partition: Int32) -> Int64? {
        cachedWatermarks(topic: topic, partition: partition)?.high
    }

    /// Whether fetching from an assigned partition is paused: by ``pause(_:)``, by back-pressure
    /// (the buffer is full), or because the partition's assign handler has not returned yet. While
    /// it is, ``cachedHighWatermark(topic:partition:)`` is not refreshed.
    public func isFetchPaused(topic: String, partition: Int32) -> Bool {
        state.withLock { $0.isFetchPaused(KafkaTopicPartition(topic: topic, partition: partition)) }
    }

    /// Both watermarks of a partition as this consumer last learned them (see
    /// ``cachedHighWatermark(topic:partition:)``); `nil` while either is unknown.
    public func cachedWatermarks(topic: String, partition: Int32) -> KafkaWatermarks? {
        guard handleGuard.enter() else { return nil }
        defer { handleGuard.leave() }
        return RDKafkaOffsets.cachedWatermarks(client.handle, topic: topic, partition: partition)
    }

    /// The low and high watermarks of a partition, asked from the broker. Runs the blocking
    /// query on a dedicated thread.
    public func queryWatermarks(
        topic: String,
        partition: Int32,
        timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> KafkaWatermarks {
        try await handleGuard.blockingCall("kafka-consumer.watermarks", on: client, owner: "consumer", timeout: timeout) {
            RDKafkaOffsets.queryWatermarks($0, topic: topic, partition: partition, timeoutMs: $1)
        }
    }

    /// Waits for the next batch of messages (iterator support). Cancelling the waiting
    /// task makes it throw `CancellationError`.
    func nextBatch() async throws -> MessageBatch? {
        let limits = configuration.bufferLimits
        let id = waiterIDs.wrappingAdd(1, ordering: .relaxed).newValue
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: ConsumerStateMachine.Waiter) in
                let (action, wake) = state.withLock { state -> (ConsumerStateMachine.NextAction, Bool) in
                    let action = state.next()
                    if case .wait = action { state.addWaiter(continuation, id: id) }
                    return (action, state.mayResume(limits))
                }
                if wake { wakePollThread() }
                switch action {
                case .batch(let batch): continuation.resume(returning: batch)
                case .wait: if Task.isCancelled, let waiter = state.withLock({ $0.removeWaiter(id: id) }) {
                    waiter.resume(throwing: CancellationError())
                }
                case .end: continuation.resume(returning: nil)
                case .fail(let error): continuation.resume(throwing: error)
                }
            }
        } onCancel: {
            state.withLock { $0.removeWaiter(id: id) }?.resume(throwing: CancellationError())
        }
    }
}
