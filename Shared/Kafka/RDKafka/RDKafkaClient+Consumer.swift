import CRdKafka
import Foundation
import Logging

// The C calls of `KafkaConsumer` (creation, subscription, the poll thread's calls and close), so that
// the public consumer file imports no C module (swift-kafka-client's layout).

extension RDKafkaClient {
    /// Creates a consumer client from `properties`.
    static func consumer(properties: [String: String], logger: Logger) throws(KafkaError) -> RDKafkaClient {
        try create(type: RD_KAFKA_CONSUMER, properties: properties, logger: logger, delegate: nil)
    }

    /// Forwards the main queue (logs, errors, rebalances) to the consumer queue, so that one poll
    /// serves them all, and returns the consumer queue.
    func takeConsumerQueue() -> RDKafkaQueue? {
        rd_kafka_poll_set_consumer(handle)
        return rd_kafka_queue_get_consumer(handle).map(RDKafkaQueue.init)
    }

    /// Subscribes to `topics` (group mode).
    func subscribe(topics: [String]) throws(KafkaError) {
        let list = RDKafkaTopicPartitionList(capacity: topics.count)
        for topic in topics { list.add(topic: topic, partition: RD_KAFKA_PARTITION_UA) }
        let err = rd_kafka_subscribe(handle, list.pointer)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(rdKafka: err, context: "subscribe to \(topics)") }
    }

    /// Destroys a client nobody uses yet on a thread of its own (`rd_kafka_destroy` blocks), for an
    /// initializer that fails after creating it.
    func destroyInBackground() {
        let handle = UncheckedHandle(handle)
        Thread { rd_kafka_destroy(handle.pointer) }.start()
    }

    /// The next message or error event, waiting at most `timeoutMilliseconds`; nil when none came.
    /// Destroy it after use.
    func pollConsumer(timeoutMilliseconds: Int32) -> RDKafkaPolledMessage? {
        rd_kafka_consumer_poll(handle, timeoutMilliseconds).map(RDKafkaPolledMessage.init)
    }

    /// Closes the consumer (revoke, commit, leave the group); blocks. Nil when it closed cleanly.
    func closeConsumer() -> KafkaError? {
        let err = rd_kafka_consumer_close(handle)
        return err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(rdKafka: err)
    }
}

/// The consumer queue (`rd_kafka_queue_t`). `@unchecked Sendable`: librdkafka queues are thread-safe;
/// ``destroy()`` happens once, after the poll thread ended.
struct RDKafkaQueue: @unchecked Sendable {
    private let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }

    /// Messages and events waiting in the queue.
    var length: Int { rd_kafka_queue_length(pointer) }

    /// Wakes a thread blocked polling the queue.
    func yield() { rd_kafka_queue_yield(pointer) }

    func destroy() { rd_kafka_queue_destroy(pointer) }
}

/// A message or error event from `rd_kafka_consumer_poll`, valid until ``destroy()``.
struct RDKafkaPolledMessage {
    let pointer: UnsafeMutablePointer<rd_kafka_message_t>

    init(_ pointer: UnsafeMutablePointer<rd_kafka_message_t>) { self.pointer = pointer }

    /// Nil for a message; the error for an error event.
    var consumeError: RDKafkaConsumeError? {
        pointer.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : RDKafkaConsumeError(message: pointer)
    }

    func destroy() { rd_kafka_message_destroy(pointer) }
}

/// An error event of the consumer poll.
struct RDKafkaConsumeError {
    private let err: rd_kafka_resp_err_t
    private let message: UnsafeMutablePointer<rd_kafka_message_t>

    fileprivate init(message: UnsafeMutablePointer<rd_kafka_message_t>) {
        self.err = message.pointee.err
        self.message = message
    }

    /// The end of a partition was reached (not an error).
    var isPartitionEOF: Bool { err == RD_KAFKA_RESP_ERR__PARTITION_EOF }
    /// librdkafka raised a fatal error (the client's ``RDKafkaClient/fatalError`` says which).
    var isFatal: Bool { err == RD_KAFKA_RESP_ERR__FATAL }
    /// The error as a fatal ``KafkaError``.
    var fatalError: KafkaError { KafkaError(rdKafka: err, isFatal: true) }
    /// The librdkafka name of the error code.
    var name: String { String(cString: rd_kafka_err2name(err)) }
    /// The event's error text.
    var reason: String { rd_kafka_message_errstr(message).map { String(cString: $0) } ?? "" }
}
