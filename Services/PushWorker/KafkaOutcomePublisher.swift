import CallContract
import Foundation
import Kafka

/// Writes the worker's outcomes to Kafka: statuses into the request's partition number of the
/// status topic, dead letters (original bytes + reason headers) to the DLQ topic. Each call
/// returns after the broker acknowledged the record (idempotent producer, acks=all).
public struct KafkaOutcomePublisher: OutcomePublishing {
    public let producer: KafkaProducer
    public let statusTopic: String
    public let deadLetterTopic: String

    public init(producer: KafkaProducer, statusTopic: String = Topics.status, deadLetterTopic: String = Topics.deadLetter) {
        self.producer = producer
        self.statusTopic = statusTopic
        self.deadLetterTopic = deadLetterTopic
    }

    public func publish(status: CallStatus, partition: Int32) async throws {
        let record = KafkaProducerRecord(topic: statusTopic, partition: partition, key: Array(status.callId.utf8),
                                         value: Array(try status.encoded()))
        _ = try await producer.send(record)
    }

    /// Kafka errors that no retry of the same record can fix: the record is too large for the topic,
    /// its partition or topic does not exist, or the worker may not write it.
    static let permanentCodes: Set<String> = [
        "MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD", "_INVALID_ARG",
        "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "TOPIC_AUTHORIZATION_FAILED", "INVALID_REQUIRED_ACKS", "CORRUPT_MESSAGE",
    ]

    public func classify(_ error: any Error) -> OutcomeWriteFailure {
        guard let error = error as? KafkaError, !error.isFatal, Self.permanentCodes.contains(error.code.rawValue) else { return .retriable }
        return .permanent(code: error.code.rawValue)
    }

    public func deadLetter(key: [UInt8]?, value: [UInt8], headers: [(String, String)]) async throws {
        let record = KafkaProducerRecord(topic: deadLetterTopic, key: key, value: value,
                                         headers: headers.map { KafkaHeader(key: $0.0, string: $0.1) })
        _ = try await producer.send(record)
    }
}
