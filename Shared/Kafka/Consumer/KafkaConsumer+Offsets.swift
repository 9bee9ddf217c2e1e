import CRdKafka

extension KafkaConsumer {
    /// Stores `message.offset + 1` for its partition: the message is processed. Stored
    /// offsets are committed automatically, on revoke and on close.
    ///
    /// - Throws: ``KafkaError/Code/notAssigned`` if the partition is no longer assigned
    ///   (it moved to another consumer, which will process the message again).
    public func storeOffset(for message: KafkaConsumerMessage) throws(KafkaError) {
        try store(topic: message.topic, partition: message.partition, offset: message.offset + 1)
    }

    /// Stores `offset` (the next offset to read, i.e. last processed + 1) for a partition.
    ///
    /// - Throws: ``KafkaError/Code/notAssigned`` if the partition is not assigned.
    public func store(topic: String, partition: Int32, offset: Int64) throws(KafkaError) {
        guard handleGuard.enter() else { throw KafkaError.shutdown("consumer") }
        defer { handleGuard.leave() }
        let list = RDKafkaTopicPartitionList()
        list.add(topic: topic, partition: partition, offset: offset)
        let handle = client.handle
        let topicPartition = KafkaTopicPartition(topic: topic, partition: partition)
        // Checked and stored under the lock the rebalance path takes before committing, so an
        // offset is never stored for a revoked partition after its final commit.
        let failure = state.withLock { state -> rd_kafka_resp_err_t in
            guard state.canStore(topicPartition) else { return RD_KAFKA_RESP_ERR__STATE }
            let err = rd_kafka_offsets_store(handle, list.pointer)
            let partitionErr = list.elements.first?.err ?? RD_KAFKA_RESP_ERR_NO_ERROR
            return err != RD_KAFKA_RESP_ERR_NO_ERROR ? err : partitionErr
        }
        guard failure == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(rdKafka: failure, context: "store offset \(offset) for \(topic)[\(partition)]")
        }
    }

    /// The offset of the first message of `partition` whose timestamp is at or after
    /// `timestampMilliseconds`, or `nil` if there is none (read from the high watermark).
    /// Runs the blocking query on a dedicated thread.
    public func offsetsForTimes(
        topic: String,
        partition: Int32,
        timestampMilliseconds: Int64,
        timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> Int64? {
        guard handleGuard.enter() else { throw KafkaError.shutdown("consumer") }
        let handle = UncheckedHandle(client.handle)
        let timeoutMs = Int32(clamping: timeout.milliseconds)
        let (err, offset) = await BlockingCall.run("kafka-consumer.offsets-for-times") { () -> (rd_kafka_resp_err_t, Int64) in
            let list = RDKafkaTopicPartitionList()
            list.add(topic: topic, partition: partition, offset: timestampMilliseconds)
            let err = rd_kafka_offsets_for_times(handle.pointer, list.pointer, timeoutMs)
            guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let element = list.elements.first else { return (err, -1) }
            return (element.err, element.offset)
        }
        handleGuard.leave()
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(rdKafka: err, context: "offsets for times \(topic)[\(partition)]")
        }
        return offset >= 0 ? offset : nil
    }

    /// Where to start reading `partition` to see every message whose timestamp is at or after
    /// `timestampMilliseconds` (e.g. to rebuild state from `now − window`).
    ///
    /// Uses offsets-for-times. A broker without timestamp lookup — librdkafka's mock cluster
    /// (``EmbeddedKafkaCluster``) answers "none" for every timestamp — is detected by also
    /// asking for timestamp 0 on a non-empty partition; then the low watermark is returned.
    /// Callers should therefore still skip messages older than the timestamp.
    public func startOffset(
        topic: String,
        partition: Int32,
        notBefore timestampMilliseconds: Int64,
        timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> Int64 {
        let watermarks = try await queryWatermarks(topic: topic, partition: partition, timeout: timeout)
        guard watermarks.low < watermarks.high else { return watermarks.high }
        if let offset = try await offsetsForTimes(
            topic: topic, partition: partition, timestampMilliseconds: timestampMilliseconds, timeout: timeout
        ) {
            return offset
        }
        // "None at or after the timestamp" — or no timestamp lookup at all: every message has a timestamp ≥ 0.
        if try await offsetsForTimes(topic: topic, partition: partition, timestampMilliseconds: 0, timeout: timeout) != nil {
            return watermarks.high
        }
        logger.debug("broker has no timestamp lookup; reading from the low watermark", metadata: ["kafka.partition": "\(topic)[\(partition)]"])
        return watermarks.low
    }

    /// The low and high watermarks of a partition, asked from the broker. Runs the blocking
    /// query on a dedicated thread.
    public func queryWatermarks(
        topic: String,
        partition: Int32,
        timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> KafkaWatermarks {
        guard handleGuard.enter() else { throw KafkaError.shutdown("consumer") }
        let handle = UncheckedHandle(client.handle)
        let timeoutMs = Int32(clamping: timeout.milliseconds)
        let (err, low, high) = await BlockingCall.run("kafka-consumer.watermarks") { () -> (rd_kafka_resp_err_t, Int64, Int64) in
            var low: Int64 = -1
            var high: Int64 = -1
            let err = rd_kafka_query_watermark_offsets(handle.pointer, topic, partition, &low, &high, timeoutMs)
            return (err, low, high)
        }
        handleGuard.leave()
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(rdKafka: err, context: "watermarks of \(topic)[\(partition)]")
        }
        return KafkaWatermarks(low: low, high: high)
    }

    /// Waits for the next batch of messages (iterator support). Cancelling the waiting
    /// task makes it throw `CancellationError`.
    func nextBatch() async throws -> MessageBatch? {
        let limit = configuration.maxBufferedMessages
        let id = waiterIDs.wrappingAdd(1, ordering: .relaxed).newValue
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: ConsumerStateMachine.Waiter) in
                let (action, wake) = state.withLock { state -> (ConsumerStateMachine.NextAction, Bool) in
                    let action = state.next()
                    if case .wait = action { state.addWaiter(continuation, id: id) }
                    return (action, state.backpressurePaused && state.bufferedCount <= limit / 2)
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
