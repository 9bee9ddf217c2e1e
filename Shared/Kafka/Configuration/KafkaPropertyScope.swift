/// Which librdkafka properties only a consumer or only a producer understands.
///
/// Services share one `KafkaConfiguration` (e.g. every `CALLPUSH_KAFKA_*` variable) between their
/// producer and consumer; librdkafka warns (`CONFWARN`) about each property of the other kind.
/// Each client therefore takes the shared properties minus those meant for the other kind.
enum KafkaPropertyScope {
    static let consumerOnly: Set<String> = [
        "group.id", "group.instance.id", "partition.assignment.strategy", "session.timeout.ms",
        "heartbeat.interval.ms", "group.protocol.type", "coordinator.query.interval.ms", "max.poll.interval.ms",
        "enable.auto.commit", "auto.commit.interval.ms", "enable.auto.offset.store", "queued.min.messages",
        "queued.max.messages.kbytes", "fetch.wait.max.ms", "fetch.message.max.bytes", "max.partition.fetch.bytes",
        "fetch.max.bytes", "fetch.min.bytes", "fetch.error.backoff.ms", "fetch.queue.backoff.ms",
        "offset.store.method", "isolation.level", "enable.partition.eof", "check.crcs", "auto.offset.reset",
        "consume.callback.max.messages",
    ]

    static let producerOnly: Set<String> = [
        "transactional.id", "transaction.timeout.ms", "enable.idempotence", "enable.gapless.guarantee",
        "queue.buffering.max.messages", "queue.buffering.max.kbytes", "queue.buffering.max.ms", "linger.ms",
        "message.send.max.retries", "retries", "queue.buffering.backpressure.threshold", "compression.codec",
        "compression.type", "compression.level", "batch.num.messages", "batch.size", "delivery.report.only.error",
        "sticky.partitioning.linger.ms", "request.required.acks", "acks", "request.timeout.ms", "message.timeout.ms",
        "delivery.timeout.ms", "partitioner", "message.copy.max.bytes",
    ]

    /// `properties` without the keys only the other kind of client understands.
    static func forProducer(_ properties: [String: String]) -> [String: String] {
        properties.filter { !consumerOnly.contains($0.key) }
    }

    static func forConsumer(_ properties: [String: String]) -> [String: String] {
        properties.filter { !producerOnly.contains($0.key) }
    }
}
