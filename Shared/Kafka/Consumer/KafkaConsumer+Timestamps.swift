import CRdKafka

/// What a broker answered to a timestamp lookup (ListOffsets with a timestamp).
enum TimestampLookup: Equatable {
    /// The first offset whose timestamp is at or after the one asked for.
    case offset(Int64)
    /// No message at or after the timestamp (a real broker answers offset -1).
    case none
    /// The broker said it cannot look up timestamps (`UNSUPPORTED_FOR_MESSAGE_FORMAT`:
    /// pre-0.10 message format; `UNSUPPORTED_VERSION` / `_UNSUPPORTED_FEATURE`: no ListOffsets v1).
    case unsupported(rd_kafka_resp_err_t)

    /// Error codes meaning "this broker cannot look up timestamps".
    static let unsupportedCodes: Set<rd_kafka_resp_err_t> = [
        RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT,
        RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION,
        RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE,
    ]
}

extension KafkaConsumer {
    /// The offset of the first message of `partition` whose timestamp is at or after
    /// `timestampMilliseconds`, or `nil` if there is none (read from the high watermark).
    /// Runs the blocking query on a dedicated thread.
    ///
    /// - Throws: ``KafkaError`` — including `UNSUPPORTED_FOR_MESSAGE_FORMAT` /
    ///   `UNSUPPORTED_VERSION` when the broker cannot look up timestamps
    ///   (``startOffset(topic:partition:notBefore:timeout:)`` falls back instead).
    public func offsetsForTimes(
        topic: String,
        partition: Int32,
        timestampMilliseconds: Int64,
        timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> Int64? {
        let (err, offset) = try await lookUpTimestamp(topic: topic, partition: partition, timestampMilliseconds, timeout: timeout)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(rdKafka: err, context: "offsets for times \(topic)[\(partition)]")
        }
        return offset >= 0 ? offset : nil
    }

    /// Where to start reading `partition` to see every message whose timestamp is at or after
    /// `timestampMilliseconds` (e.g. to rebuild state from `now − window`).
    ///
    /// - Empty partition: its high watermark.
    /// - Otherwise the broker's timestamp lookup (offsets-for-times). "None at or after the
    ///   timestamp" means every stored message is older: the high watermark.
    /// - Falls back to the low watermark (reads everything still stored) only when the broker
    ///   says it cannot look up timestamps: it answers `UNSUPPORTED_FOR_MESSAGE_FORMAT` /
    ///   `UNSUPPORTED_VERSION`, or it finds no message at or after timestamp 0 in a non-empty
    ///   partition — what librdkafka's mock cluster (``EmbeddedKafkaCluster``) answers for every
    ///   timestamp. Any other error is thrown.
    ///
    /// Timestamps need not grow with offsets (producers set them), so callers should still
    /// skip messages older than `timestampMilliseconds`.
    public func startOffset(
        topic: String,
        partition: Int32,
        notBefore timestampMilliseconds: Int64,
        timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> Int64 {
        let watermarks = try await queryWatermarks(topic: topic, partition: partition, timeout: timeout)
        guard watermarks.low < watermarks.high else { return watermarks.high }
        let name = "\(topic)[\(partition)]"
        switch try await timestampLookup(topic: topic, partition: partition, timestampMilliseconds, timeout: timeout) {
        case .offset(let offset):
            return offset
        case .unsupported(let err):
            logger.warning(
                "broker cannot look up timestamps; reading from the low watermark",
                metadata: ["kafka.partition": "\(name)", "kafka.error.code": "\(String(cString: rd_kafka_err2name(err)))"]
            )
            return watermarks.low
        case .none:
            // A real broker: every stored message is older. The mock cluster answers "none" for
            // every timestamp; tell them apart by asking for timestamp 0 (every message has one ≥ 0).
            switch try await timestampLookup(topic: topic, partition: partition, 0, timeout: timeout) {
            case .offset:
                return watermarks.high
            case .none, .unsupported:
                logger.debug("broker has no timestamp lookup; reading from the low watermark", metadata: ["kafka.partition": "\(name)"])
                return watermarks.low
            }
        }
    }

    /// One timestamp lookup, classified; errors other than "unsupported" are thrown.
    func timestampLookup(
        topic: String,
        partition: Int32,
        _ timestampMilliseconds: Int64,
        timeout: Duration
    ) async throws(KafkaError) -> TimestampLookup {
        let (err, offset) = try await lookUpTimestamp(topic: topic, partition: partition, timestampMilliseconds, timeout: timeout)
        if TimestampLookup.unsupportedCodes.contains(err) { return .unsupported(err) }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(rdKafka: err, context: "offsets for times \(topic)[\(partition)]")
        }
        return offset >= 0 ? .offset(offset) : .none
    }

    /// `rd_kafka_offsets_for_times` for one partition, on a dedicated thread.
    private func lookUpTimestamp(
        topic: String,
        partition: Int32,
        _ timestampMilliseconds: Int64,
        timeout: Duration
    ) async throws(KafkaError) -> (rd_kafka_resp_err_t, Int64) {
        guard handleGuard.enter() else { throw KafkaError.shutdown("consumer") }
        let handle = UncheckedHandle(client.handle)
        let timeoutMs = Int32(clamping: timeout.milliseconds)
        let result = await BlockingCall.run("kafka-consumer.offsets-for-times") { () -> (rd_kafka_resp_err_t, Int64) in
            let list = RDKafkaTopicPartitionList()
            list.add(topic: topic, partition: partition, offset: timestampMilliseconds)
            let err = rd_kafka_offsets_for_times(handle.pointer, list.pointer, timeoutMs)
            guard let element = list.elements.first else { return (err, -1) }
            // On a partition error the call returns it (the first one) and leaves the list as it was.
            return (err != RD_KAFKA_RESP_ERR_NO_ERROR ? err : element.err, element.offset)
        }
        handleGuard.leave()
        return result
    }
}
