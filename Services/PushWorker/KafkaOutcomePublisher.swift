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

    public func deadLetter(key: [UInt8]?, value: [UInt8], headers: [(String, String)]) async throws {
        let record = KafkaProducerRecord(topic: deadLetterTopic, key: key, value: value,
                                         headers: headers.map { KafkaHeader(key: $0.0, string: $0.1) })
        _ = try await producer.send(record)
    }
}
