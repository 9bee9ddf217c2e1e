import CRdKafka

extension KafkaConsumer {
    /// Commits `offsets` (the next offset to read, per partition) for the consumer's
    /// `group.id` and returns once the group coordinator acknowledged them.
    ///
    /// Works in manual mode too (a commit without group membership): a tool reading
    /// assigned partitions can keep its own position in a group no member has joined.
    /// The blocking commit runs on a dedicated thread.
    public func commit(_ offsets: [KafkaTopicPartition: Int64]) async throws(KafkaError) {
        guard !offsets.isEmpty else { return }
        guard handleGuard.enter() else { throw KafkaError.shutdown("consumer") }
        let handle = UncheckedHandle(client.handle)
        let items = offsets.map { ($0.key.topic, $0.key.partition, $0.value) }
        let failure = await BlockingCall.run("kafka-consumer.commit") { () -> (rd_kafka_resp_err_t, String)? in
            let list = RDKafkaTopicPartitionList(capacity: items.count)
            for (topic, partition, offset) in items { list.add(topic: topic, partition: partition, offset: offset) }
            let err = rd_kafka_commit(handle.pointer, list.pointer, 0)
            if err != RD_KAFKA_RESP_ERR_NO_ERROR { return (err, "commit") }
            if let failed = list.elements.first(where: { $0.err != RD_KAFKA_RESP_ERR_NO_ERROR }) {
                return (failed.err, "commit \(failed.partition)")
            }
            return nil
        }
        handleGuard.leave()
        if let failure { throw KafkaError(rdKafka: failure.0, context: failure.1) }
    }

    /// The committed offsets of `partitions` for the consumer's `group.id` (`nil` where the
    /// group has none). Bounded by `timeout`; runs on a dedicated thread.
    public func committedOffsets(
        _ partitions: [KafkaTopicPartition],
        timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> [KafkaTopicPartition: Int64?] {
        guard !partitions.isEmpty else { return [:] }
        guard handleGuard.enter() else { throw KafkaError.shutdown("consumer") }
        let handle = UncheckedHandle(client.handle)
        let timeoutMs = Int32(clamping: timeout.milliseconds)
        let result = await BlockingCall.run("kafka-consumer.committed") { () -> Result<[KafkaTopicPartition: Int64?], KafkaError> in
            let list = RDKafkaTopicPartitionList.make(partitions)
            let err = rd_kafka_committed(handle.pointer, list.pointer, timeoutMs)
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
        handleGuard.leave()
        return try result.get()
    }
}
