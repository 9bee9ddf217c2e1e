import CRdKafka

/// The librdkafka calls behind ``KafkaConsumer``'s offset API (storing, watermarks, commits),
/// so that the consumer's files import no C. The blocking ones run on the caller's thread: the
/// consumer calls them inside ``BlockingCall``.
enum RDKafkaOffsets {
    /// A store that succeeded.
    static let stored: Int32 = RD_KAFKA_RESP_ERR_NO_ERROR.rawValue
    /// The code of a store refused because the partition is not (or no longer) assigned; a
    /// ``KafkaError`` made from it has code ``KafkaError/Code/notAssigned``.
    static let notAssigned: Int32 = RD_KAFKA_RESP_ERR__STATE.rawValue

    /// `rd_kafka_offsets_store` of `list`: ``stored``, else the call's or the partition's error code.
    static func store(_ handle: OpaquePointer, _ list: RDKafkaTopicPartitionList) -> Int32 {
        let err = rd_kafka_offsets_store(handle, list.pointer)
        let partitionErr = list.elements.first?.err ?? RD_KAFKA_RESP_ERR_NO_ERROR
        return (err != RD_KAFKA_RESP_ERR_NO_ERROR ? err : partitionErr).rawValue
    }

    /// The watermarks librdkafka last learned from fetches; nil while either is unknown.
    static func cachedWatermarks(_ handle: OpaquePointer, topic: String, partition: Int32) -> KafkaWatermarks? {
        var low: Int64 = -1
        var high: Int64 = -1
        let err = rd_kafka_get_watermark_offsets(handle, topic, partition, &low, &high)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, low >= 0, high >= 0 else { return nil }
        return KafkaWatermarks(low: low, high: high)
    }

    /// Asks the broker for a partition's watermarks (blocking, at most `timeoutMs`).
    static func queryWatermarks(
        _ handle: OpaquePointer, topic: String, partition: Int32, timeoutMs: Int32
    ) -> Result<KafkaWatermarks, KafkaError> {
        var low: Int64 = -1
        var high: Int64 = -1
        let err = rd_kafka_query_watermark_offsets(handle, topic, partition, &low, &high, timeoutMs)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return .failure(KafkaError(rdKafka: err, context: "watermarks of \(topic)[\(partition)]"))
        }
        return .success(KafkaWatermarks(low: low, high: high))
    }

    /// Commits `offsets` synchronously (blocking until the coordinator answers); nil when committed.
    static func commit(_ handle: OpaquePointer, _ offsets: [(topic: String, partition: Int32, offset: Int64)]) -> KafkaError? {
        let list = RDKafkaTopicPartitionList(capacity: offsets.count)
        for (topic, partition, offset) in offsets { list.add(topic: topic, partition: partition, offset: offset) }
        let err = rd_kafka_commit(handle, list.pointer, 0)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { return KafkaError(rdKafka: err, context: "commit") }
        if let failed = list.elements.first(where: { $0.err != RD_KAFKA_RESP_ERR_NO_ERROR }) {
            return KafkaError(rdKafka: failed.err, context: "commit \(failed.partition)")
        }
        return nil
    }

    /// The group's committed offsets of `partitions` (blocking, at most `timeoutMs`); `nil` where
    /// the group has none.
    static func committed(
        _ handle: OpaquePointer, _ partitions: [KafkaTopicPartition], timeoutMs: Int32
    ) -> Result<[KafkaTopicPartition: Int64?], KafkaError> {
        let list = RDKafkaTopicPartitionList.make(partitions)
        let err = rd_kafka_committed(handle, list.pointer, timeoutMs)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { return .failure(KafkaError(rdKafka: err, context: "committed offsets")) }
        var answer: [KafkaTopicPartition: Int64?] = [:]
        for element in list.elements {
            if element.err != RD_KAFKA_RESP_ERR_NO_ERROR {
                return .failure(KafkaError(rdKafka: element.err, context: "committed offset of \(element.partition)"))
            }
            answer[element.partition] = element.offset >= 0 ? element.offset : nil
        }
        return .success(answer)
    }
}

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

    /// The librdkafka name of an error code (for logs).
    static func name(of err: rd_kafka_resp_err_t) -> String { String(cString: rd_kafka_err2name(err)) }

    /// An ``unsupported(_:)`` answer's code as the error of a caller that needs an offset.
    static func error(_ err: rd_kafka_resp_err_t, context: String) -> KafkaError {
        KafkaError(rdKafka: err, context: context)
    }
}

extension RDKafkaOffsets {
    /// `rd_kafka_offsets_for_times` for one partition (blocking, at most `timeoutMs`), classified;
    /// errors other than "unsupported" fail.
    static func lookUpTimestamp(
        _ handle: OpaquePointer, topic: String, partition: Int32, _ timestampMilliseconds: Int64, timeoutMs: Int32
    ) -> Result<TimestampLookup, KafkaError> {
        let list = RDKafkaTopicPartitionList()
        list.add(topic: topic, partition: partition, offset: timestampMilliseconds)
        let callErr = rd_kafka_offsets_for_times(handle, list.pointer, timeoutMs)
        // On a partition error the call returns it (the first one) and leaves the list as it was.
        var err = callErr
        var offset: Int64 = -1
        if let element = list.elements.first {
            if callErr == RD_KAFKA_RESP_ERR_NO_ERROR { err = element.err }
            offset = element.offset
        }
        if TimestampLookup.unsupportedCodes.contains(err) { return .success(.unsupported(err)) }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return .failure(KafkaError(rdKafka: err, context: "offsets for times \(topic)[\(partition)]"))
        }
        return .success(offset >= 0 ? .offset(offset) : .none)
    }
}

extension KafkaError {
    /// Wraps a librdkafka response error code given as its raw value.
    init(rdKafkaCode code: Int32, context: String? = nil) {
        self.init(rdKafka: rd_kafka_resp_err_t(rawValue: code), context: context)
    }
}
