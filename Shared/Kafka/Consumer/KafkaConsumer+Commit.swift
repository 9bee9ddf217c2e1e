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
        let items = offsets.map { (topic: $0.key.topic, partition: $0.key.partition, offset: $0.value) }
        let failure = await BlockingCall.run("kafka-consumer.commit") { RDKafkaOffsets.commit(handle.pointer, items) }
        handleGuard.leave()
        if let failure { throw failure }
    }

    /// The committed offsets of `partitions` for the consumer's `group.id` (`nil` where the
    /// group has none). Bounded by `timeout`; runs on a dedicated thread.
    public func committedOffsets(
        _ partitions: [KafkaTopicPartition],
        timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> [KafkaTopicPartition: Int64?] {
        guard !partitions.isEmpty else { return [:] }
        return try await handleGuard.blockingCall("kafka-consumer.committed", on: client, owner: "consumer", timeout: timeout) {
            RDKafkaOffsets.committed($0, partitions, timeoutMs: $1)
        }
    }
}
