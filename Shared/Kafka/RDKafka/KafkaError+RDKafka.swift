import CRdKafka

// The C side of ``KafkaError``: conversions from librdkafka's error codes and objects, and the sets of
// codes behind `isRetriable` and `disposition`, so that the public error file imports no C.
extension KafkaError {
    /// Wraps a librdkafka response error code.
    init(rdKafka err: rd_kafka_resp_err_t, context: String? = nil, isFatal: Bool? = nil) {
        let name = String(cString: rd_kafka_err2name(err))
        let text = String(cString: rd_kafka_err2str(err))
        let fatal = isFatal ?? (err == RD_KAFKA_RESP_ERR__FATAL)
        self.init(
            code: err == RD_KAFKA_RESP_ERR__STATE ? .notAssigned : Code(rawValue: name),
            message: context.map { "\($0): \(text)" } ?? text,
            rdKafkaCode: err.rawValue,
            isRetriable: !fatal && Self.retriableCodes.contains(err.rawValue),
            isFatal: fatal
        )
    }

    /// Wraps (and destroys) an `rd_kafka_error_t`.
    init(consuming error: OpaquePointer, context: String? = nil) {
        let err = rd_kafka_error_code(error)
        let text = String(cString: rd_kafka_error_string(error))
        self.init(
            code: Code(rawValue: String(cString: rd_kafka_err2name(err))),
            message: context.map { "\($0): \(text)" } ?? text,
            rdKafkaCode: err.rawValue,
            isRetriable: rd_kafka_error_is_retriable(error) != 0,
            isFatal: rd_kafka_error_is_fatal(error) != 0
        )
        rd_kafka_error_destroy(error)
    }

    /// Transient conditions: the same request can succeed later.
    static let retriableCodes: Set<Int32> = Set(([
        RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, RD_KAFKA_RESP_ERR__TIMED_OUT, RD_KAFKA_RESP_ERR__TRANSPORT,
        RD_KAFKA_RESP_ERR__QUEUE_FULL, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE,
        RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
        RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND, RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
        RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION,
        RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
        RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS, RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS,
        RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR,
    ] as [rd_kafka_resp_err_t]).map(\.rawValue))

    /// No broker could be reached in time (``KafkaAdminClient/isUnreachable(_:)``).
    static let unreachableCodes: Set<Int32> = Set(([
        RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__TIMED_OUT, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__RESOLVE,
    ] as [rd_kafka_resp_err_t]).map(\.rawValue))

    /// The client is going away: purged at shutdown, or destroyed.
    static let shutdownCodes: Set<Int32> = Set(([
        RD_KAFKA_RESP_ERR__PURGE_QUEUE, RD_KAFKA_RESP_ERR__PURGE_INFLIGHT, RD_KAFKA_RESP_ERR__DESTROY,
    ] as [rd_kafka_resp_err_t]).map(\.rawValue))

    /// Missing permissions or failed authentication.
    static let unauthorizedCodes: Set<Int32> = Set(([
        RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED,
        RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED, RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        RD_KAFKA_RESP_ERR_DELEGATION_TOKEN_AUTHORIZATION_FAILED, RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED,
        RD_KAFKA_RESP_ERR__AUTHENTICATION,
    ] as [rd_kafka_resp_err_t]).map(\.rawValue))

    /// Errors about the record itself. librdkafka reports `_UNKNOWN_PARTITION` / `_UNKNOWN_TOPIC`
    /// locally only once it knows the topic's metadata (before that the record waits), so they
    /// mean the cluster has no such partition or topic.
    static let recordRejectedCodes: Set<Int32> = Set(([
        RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION,
        RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC, RD_KAFKA_RESP_ERR_INVALID_RECORD, RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE,
        RD_KAFKA_RESP_ERR__INVALID_ARG, RD_KAFKA_RESP_ERR__BAD_MSG,
        RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP, RD_KAFKA_RESP_ERR_POLICY_VIOLATION,
        RD_KAFKA_RESP_ERR_INVALID_REQUIRED_ACKS, RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION,
    ] as [rd_kafka_resp_err_t]).map(\.rawValue))
}
