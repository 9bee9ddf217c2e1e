import CRdKafka

/// An owned `rd_kafka_topic_partition_list_t`.
///
/// Not `Sendable`: create, use and destroy it on one thread.
final class RDKafkaTopicPartitionList {
    let pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init(capacity: Int = 1) {
        pointer = rd_kafka_topic_partition_list_new(Int32(clamping: max(capacity, 1)))
    }

    deinit {
        rd_kafka_topic_partition_list_destroy(pointer)
    }

    /// Adds `topic`/`partition` with `offset`.
    func add(topic: String, partition: Int32, offset: Int64 = Int64(RD_KAFKA_OFFSET_INVALID)) {
        if let element = rd_kafka_topic_partition_list_add(pointer, topic, partition) {
            element.pointee.offset = offset
        }
    }

    /// The elements as values (topic, partition, offset, error).
    var elements: [(partition: KafkaTopicPartition, offset: Int64, err: rd_kafka_resp_err_t)] {
        Self.elements(of: pointer)
    }

    static func elements(
        of list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) -> [(partition: KafkaTopicPartition, offset: Int64, err: rd_kafka_resp_err_t)] {
        guard let items = list.pointee.elems else { return [] }
        return (0..<Int(list.pointee.cnt)).compactMap { index in
            let item = items[index]
            guard let topic = item.topic else { return nil }
            return (KafkaTopicPartition(topic: String(cString: topic), partition: item.partition), item.offset, item.err)
        }
    }

    static func partitions(of list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> [KafkaTopicPartition] {
        elements(of: list).map(\.partition)
    }

    static func make(_ partitions: [KafkaTopicPartition]) -> RDKafkaTopicPartitionList {
        let list = RDKafkaTopicPartitionList(capacity: partitions.count)
        for partition in partitions { list.add(topic: partition.topic, partition: partition.partition) }
        return list
    }
}
