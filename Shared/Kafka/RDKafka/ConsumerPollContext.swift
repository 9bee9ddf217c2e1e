import CRdKafka

/// State of the consumer's poll thread: the batch being collected and a topic-name cache.
///
/// `@unchecked Sendable`: only the poll thread (the loop and the rebalance callback it runs)
/// touches it; it is handed to that thread once at start.
final class ConsumerPollContext: @unchecked Sendable {
    var pending: [KafkaConsumerMessage] = []
    var pendingEpoch = 0
    /// The most messages collected per batch (capacity reserved up front, no regrowth).
    var batchCapacity = 256
    /// The consumer queue was at `queued.min.messages` (librdkafka stopped fetching).
    var fetchQueueWasFull = false
    /// Messages polled since the broker threads were last woken.
    var polledSinceWake = 0
    private var lastTopic: OpaquePointer?
    private var lastTopicName = ""

    /// Converts a librdkafka message (copies key, value and headers).
    func makeMessage(_ message: UnsafeMutablePointer<rd_kafka_message_t>) -> KafkaConsumerMessage {
        let raw = message.pointee
        if raw.rkt != lastTopic, let rkt = raw.rkt {
            lastTopic = rkt
            lastTopicName = String(cString: rd_kafka_topic_name(rkt))
        }
        let value = raw.payload.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: raw.len)) } ?? []
        let key = raw.key.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: raw.key_len)) }
        var headers: [KafkaHeader] = []
        var list: OpaquePointer?
        if rd_kafka_message_headers(message, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list {
            var index = 0
            var name: UnsafePointer<CChar>?
            var bytes: UnsafeRawPointer?
            var size = 0
            while rd_kafka_header_get_all(list, index, &name, &bytes, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                let headerValue = bytes.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: size)) }
                headers.append(KafkaHeader(key: name.map { String(cString: $0) } ?? "", value: headerValue))
                index += 1
            }
        }
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        return KafkaConsumerMessage(
            topic: lastTopicName,
            partition: raw.partition,
            offset: raw.offset,
            key: key,
            value: value,
            headers: headers,
            timestampMilliseconds: timestampType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp,
            fetchEpoch: pendingEpoch
        )
    }
}
