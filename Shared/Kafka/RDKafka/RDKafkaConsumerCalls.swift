import CRdKafka

/// The librdkafka calls behind ``KafkaConsumer``'s commands (metadata before an assignment,
/// assign, seek), so that the consumer's files import no C.
enum RDKafkaConsumerCalls {
    /// Asks for the metadata of each of `topics` (blocking, at most `timeoutMs` each); failures
    /// are ignored (librdkafka keeps retrying).
    static func loadMetadata(_ handle: OpaquePointer, topics: Set<String>, timeoutMs: Int32) {
        for topic in topics {
            guard let rkt = rd_kafka_topic_new(handle, topic, nil) else { continue }
            var metadata: UnsafePointer<rd_kafka_metadata>?
            if rd_kafka_metadata(handle, 0, rkt, &metadata, timeoutMs) == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata {
                rd_kafka_metadata_destroy(metadata)
            }
            rd_kafka_topic_destroy(rkt)
        }
    }

    /// The partition list of `assignments`, each at its start position.
    static func assignmentList(_ assignments: [KafkaPartitionAssignment]) -> RDKafkaTopicPartitionList {
        let list = RDKafkaTopicPartitionList(capacity: assignments.count)
        for assignment in assignments {
            let offset: Int64
            switch assignment.start {
            case .beginning: offset = Int64(RD_KAFKA_OFFSET_BEGINNING)
            case .end: offset = Int64(RD_KAFKA_OFFSET_END)
            case .offset(let value): offset = value
            }
            list.add(topic: assignment.topicPartition.topic, partition: assignment.topicPartition.partition, offset: offset)
        }
        return list
    }

    /// `rd_kafka_assign` of `list`; nil when accepted.
    static func assign(_ handle: OpaquePointer, _ list: RDKafkaTopicPartitionList) -> KafkaError? {
        let err = rd_kafka_assign(handle, list.pointer)
        return err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(rdKafka: err, context: "assign")
    }

    /// Moves `partition`'s position to `offset` (asynchronously: timeout 0, as 2.0.2's seek
    /// timeouts are broken; `_IN_PROGRESS` is success); nil when accepted.
    static func seek(_ handle: OpaquePointer, _ partition: KafkaTopicPartition, offset: Int64) -> KafkaError? {
        let list = RDKafkaTopicPartitionList()
        list.add(topic: partition.topic, partition: partition.partition, offset: offset)
        if let error = rd_kafka_seek_partitions(handle, list.pointer, 0) {
            return KafkaError(consuming: error, context: "seek \(partition)")
        }
        if let failed = list.elements.first(where: {
            $0.err != RD_KAFKA_RESP_ERR_NO_ERROR && $0.err != RD_KAFKA_RESP_ERR__IN_PROGRESS
        }) {
            return KafkaError(rdKafka: failed.err, context: "seek \(partition)")
        }
        return nil
    }
}
