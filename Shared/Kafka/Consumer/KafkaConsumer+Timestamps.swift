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
        switch try await timestampLookup(topic: topic, partition: partition, timestampMilliseconds, timeout: timeout) {
        case .offset(let offset): return offset
        case .none: return nil
        case .unsupported(let err): throw TimestampLookup.error(err, context: "offsets for times \(topic)[\(partition)]")
        }
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
                metadata: ["kafka.partition": "\(name)", "kafka.error.code": "\(TimestampLookup.name(of: err))"]
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

    /// One timestamp lookup, classified; errors other than "unsupported" are thrown. Runs the
    /// blocking query on a dedicated thread.
    func timestampLookup(
        topic: String,
        partition: Int32,
        _ timestampMilliseconds: Int64,
        timeout: Duration
    ) async throws(KafkaError) -> TimestampLookup {
        try await handleGuard.blockingCall("kafka-consumer.offsets-for-times", on: client, owner: "consumer", timeout: timeout) {
            RDKafkaOffsets.lookUpTimestamp($0, topic: topic, partition: partition, timestampMilliseconds, timeoutMs: $1)
        }
    }
}
