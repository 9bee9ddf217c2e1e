import CRdKafka

extension ProducerClient {
    /// Sends `records` and returns one result per record, in order, once every record was
    /// acknowledged or failed, or once `deadline` passed (then the records still unanswered fail
    /// with ``KafkaError/Code/timeout``, possibly persisted: librdkafka keeps them and may still
    /// deliver them). One continuation per batch; a deadline is one entry in the producer's
    /// ``DeadlineSweeper`` (the shared one), not a task.
    ///
    /// - Throws: ``KafkaError`` only when nothing could be sent (shut down, fatal error).
    func send(
        _ records: [KafkaProducerRecord], deadline: ContinuousClock.Instant?
    ) async throws(KafkaError) -> [Result<KafkaDeliveryReport, KafkaError>] {
        if let fatal = client.context.fatalError { throw fatal }
        guard state.withLock({ $0.enterSend() }) else { throw KafkaError.shutdown("producer") }
        let batch = DeliveryBatch(count: records.count)
        let failedLocally = await produceAll(records, batch: batch, deadline: deadline)
        if let continuation = state.withLock({ $0.leaveSend() }) { continuation.resume() }
        let token = deadline.map { deadline in deadlines.add(at: deadline) { batch.expire() } }
        let answered = await batch.senderDoneAndWait()
        if let token { deadlines.remove(token) }
        var results: [Result<KafkaDeliveryReport, KafkaError>] = []
        results.reserveCapacity(records.count)
        for index in records.indices {
            // Unanswered at the deadline: the outcome slots of messages librdkafka still holds may be
            // written at any moment, so only those the sender failed itself are read.
            if answered || failedLocally.contains(index) {
                results.append(batch.result(index: index, topic: records[index].topic))
            } else {
                results.append(.failure(KafkaError(
                    code: .timeout,
                    message: "no acknowledgement for the record to '\(records[index].topic)' within the caller's bound",
                    isRetriable: true,
                    persistenceStatus: .possiblyPersisted
                )))
            }
        }
        return results
    }

    /// Waits until every message handed to librdkafka so far was acknowledged or failed, at
    /// most `timeout`. Returns `true` if the queue is empty. `rd_kafka_flush` blocks, so it runs
    /// on a dedicated thread.
    func flush(timeout: Duration) async -> Bool {
        guard state.withLock({ $0.enterSend() }) else { return false }
        let handle = UncheckedHandle(client.handle)
        let timeoutMs = Int32(clamping: timeout.milliseconds)
        let err = await BlockingCall.run("kafka-producer.flush") { rd_kafka_flush(handle.pointer, timeoutMs) }
        if let continuation = state.withLock({ $0.leaveSend() }) { continuation.resume() }
        return err == RD_KAFKA_RESP_ERR_NO_ERROR
    }

    /// Hands every record to librdkafka, waiting for room when its queue is full (bounded by
    /// ``KafkaProducerConfiguration/queueFullTimeout`` and `deadline`). Returns the indices of the
    /// records failed here (they get no delivery report).
    private func produceAll(
        _ records: [KafkaProducerRecord], batch: DeliveryBatch, deadline: ContinuousClock.Instant?
    ) async -> [Int] {
        var failedLocally: [Int] = []
        var index = 0
        var cachedTopic: (name: String, handle: OpaquePointer)?
        var fullSince: ContinuousClock.Instant?
        while index < records.count {
            let record = records[index]
            let rkt: OpaquePointer
            if let cached = cachedTopic, cached.name == record.topic {
                rkt = cached.handle
            } else if let handle = topicHandle(record.topic) {
                rkt = handle
                cachedTopic = (record.topic, handle)
            } else {
                batch.fail(index: index, err: RD_KAFKA_RESP_ERR__INVALID_ARG)
                failedLocally.append(index)
                index += 1
                continue
            }
            let err = produce(record, topic: rkt, opaque: batch.opaque(for: index))
            if err == RD_KAFKA_RESP_ERR_NO_ERROR {
                fullSince = nil
                index += 1
                continue
            }
            guard err == RD_KAFKA_RESP_ERR__QUEUE_FULL else {
                batch.fail(index: index, err: err)
                failedLocally.append(index)
                index += 1
                continue
            }
            // Back-pressure: wait for delivery reports to free room, bounded.
            let now = ContinuousClock.now
            let since = fullSince ?? now
            fullSince = since
            let beforeDeadline = deadline.map { now < $0 } ?? true
            let canWait = now - since < configuration.queueFullTimeout && beforeDeadline
            if canWait, await waitForSpace() {
                continue
            }
            let failure = !beforeDeadline ? DeliveryOutcome.deadlineCode
                : canWait ? DeliveryOutcome.shutdownCode : RD_KAFKA_RESP_ERR__QUEUE_FULL.rawValue
            while index < records.count {
                batch.fail(index: index, err: rd_kafka_resp_err_t(rawValue: failure))
                failedLocally.append(index)
                index += 1
            }
        }
        return failedLocally
    }

    /// Suspends until the poll thread served delivery reports (or its poll timed out).
    /// Returns `false` if the producer is shutting down.
    private func waitForSpace() async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if !state.withLock({ $0.waitForSpace(continuation) }) { continuation.resume() }
        }
        return state.withLock { state in
            if case .running = state.lifecycle { return true }
            return false
        }
    }

    private func topicHandle(_ name: String) -> OpaquePointer? {
        topics.withLock { topics -> OpaquePointer? in
            if let known = topics[name] { return known.pointer }
            guard let created = rd_kafka_topic_new(client.handle, name, nil) else { return nil }
            topics[name] = UncheckedHandle(created)
            return created
        }
    }

    /// One `rd_kafka_produceva` call (librdkafka copies key, value and headers).
    private func produce(_ record: KafkaProducerRecord, topic: OpaquePointer, opaque: UnsafeMutableRawPointer) -> rd_kafka_resp_err_t {
        var headers: OpaquePointer?
        if !record.headers.isEmpty {
            let list = rd_kafka_headers_new(record.headers.count)
            for header in record.headers {
                if let value = header.value {
                    value.withUnsafeBytes { bytes in
                        _ = rd_kafka_header_add(list, header.key, -1, bytes.baseAddress, bytes.count)
                    }
                } else {
                    _ = rd_kafka_header_add(list, header.key, -1, nil, 0)
                }
            }
            headers = list
        }
        let err = record.value.withUnsafeBytes { value -> rd_kafka_resp_err_t in
            withOptionalBytes(record.key) { key in
                withUnsafeTemporaryAllocation(of: rd_kafka_vu_t.self, capacity: 7) { vus in
                    var count = 0
                    func append(_ type: rd_kafka_vtype_t, _ fill: (inout rd_kafka_vu_t) -> Void) {
                        var vu = rd_kafka_vu_t()
                        vu.vtype = type
                        fill(&vu)
                        vus[count] = vu
                        count += 1
                    }
                    append(RD_KAFKA_VTYPE_RKT) { $0.u.rkt = topic }
                    append(RD_KAFKA_VTYPE_PARTITION) { $0.u.i32 = record.partition ?? RD_KAFKA_PARTITION_UA }
                    append(RD_KAFKA_VTYPE_VALUE) {
                        $0.u.mem.ptr = UnsafeMutableRawPointer(mutating: value.baseAddress)
                        $0.u.mem.size = value.count
                    }
                    if let key {
                        append(RD_KAFKA_VTYPE_KEY) {
                            $0.u.mem.ptr = UnsafeMutableRawPointer(mutating: key.baseAddress)
                            $0.u.mem.size = key.count
                        }
                    }
                    append(RD_KAFKA_VTYPE_MSGFLAGS) { $0.u.i = RD_KAFKA_MSG_F_COPY }
                    append(RD_KAFKA_VTYPE_OPAQUE) { $0.u.ptr = opaque }
                    if let timestamp = record.timestampMilliseconds {
                        append(RD_KAFKA_VTYPE_TIMESTAMP) { $0.u.i64 = timestamp }
                    }
                    if let headers {
                        append(RD_KAFKA_VTYPE_HEADERS) { $0.u.headers = headers }
                    }
                    guard let error = rd_kafka_produceva(client.handle, vus.baseAddress, count) else {
                        return RD_KAFKA_RESP_ERR_NO_ERROR
                    }
                    let code = rd_kafka_error_code(error)
                    rd_kafka_error_destroy(error)
                    return code
                }
            }
        }
        // On failure librdkafka did not take ownership of the headers.
        if err != RD_KAFKA_RESP_ERR_NO_ERROR, let headers { rd_kafka_headers_destroy(headers) }
        return err
    }
}

private func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
    guard let bytes else { return body(nil) }
    return bytes.withUnsafeBytes { body($0) }
}
