import CRdKafka

/// One librdkafka rebalance callback as the consumer sees it: what happened, to which
/// partitions, and the calls that answer it (valid only during the callback, on the poll thread).
struct RDKafkaRebalance {
    enum Kind {
        case assign
        case revoke
        /// A rebalance error: the consumer drops its assignment.
        case failed(KafkaError)
    }

    let kind: Kind
    let partitions: [KafkaTopicPartition]
    private let handle: OpaquePointer
    private let list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init(_ handle: OpaquePointer, _ err: rd_kafka_resp_err_t, _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        switch err {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS: kind = .assign
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS: kind = .revoke
        default: kind = .failed(KafkaError(rdKafka: err))
        }
        self.handle = handle
        self.list = list
        partitions = RDKafkaTopicPartitionList.partitions(of: list)
    }

    /// Takes the assigned partitions (`rd_kafka_assign` of the callback's list); nil when accepted.
    func assignListed() -> KafkaError? {
        let err = rd_kafka_assign(handle, list)
        return err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(rdKafka: err)
    }

    /// Whether the revoked partitions were lost (the group moved on without this member).
    var isAssignmentLost: Bool { rd_kafka_assignment_lost(handle) != 0 }

    /// Commits the stored offsets synchronously; nil when committed or when nothing was stored.
    func commitStored() -> KafkaError? {
        let err = rd_kafka_commit(handle, nil, 0)
        return err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR__NO_OFFSET ? nil : KafkaError(rdKafka: err)
    }

    /// Drops the whole assignment.
    func unassign() {
        rd_kafka_assign(handle, nil)
    }
}

extension RDKafkaClient {
    /// Pauses or resumes fetching `partitions`; nil when librdkafka accepted it.
    func setPaused(_ partitions: [KafkaTopicPartition], paused: Bool) -> KafkaError? {
        let list = RDKafkaTopicPartitionList.make(partitions)
        let err = paused ? rd_kafka_pause_partitions(handle, list.pointer) : rd_kafka_resume_partitions(handle, list.pointer)
        return err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(rdKafka: err)
    }
}
