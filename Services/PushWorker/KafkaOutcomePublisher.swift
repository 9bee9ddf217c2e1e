import CallContract
import Foundation
import Kafka

/// Writes the worker's outcomes to Kafka: statuses into the request's partition number of the
/// status topic, dead letters (original bytes + reason headers) to the DLQ topic. Each call
/// returns after the broker acknowledged the record (idempotent producer, acks=all). Statuses
/// written at the same moment by different deliveries share one producer send
/// (`StatusWriteBatcher`); a status with a bound (an outcome written after its delivery was
/// cancelled) and dead letters are sent alone.
public struct KafkaOutcomePublisher: OutcomePublishing {
    public let producer: KafkaProducer
    public let statusTopic: String
    public let deadLetterTopic: String
    private let statuses: StatusWriteBatcher

    public init(producer: KafkaProducer, statusTopic: String = Topics.status, deadLetterTopic: String = Topics.deadLetter) {
        self.producer = producer
        self.statusTopic = statusTopic
        self.deadLetterTopic = deadLetterTopic
        self.statuses = StatusWriteBatcher { records throws(KafkaError) in
            try await producer.send(records).map { $0.map { _ in () } }
        }
    }

    public func publish(status: CallStatus, partition: Int32, within bound: Duration?) async throws {
        try await publish(status: status, partition: partition, headers: [], within: bound)
    }

    public func publish(status: CallStatus, partition: Int32, headers: [(String, String)], within bound: Duration?) async throws {
        let record = KafkaProducerRecord(topic: statusTopic, partition: partition, key: Array(status.callId.utf8),
                                         value: status.encodedBytes(), headers: headers.map { KafkaHeader(key: $0.0, string: $0.1) })
        if bound == nil { try await statuses.write(record) } else { try await send(record, within: bound) }
    }

    /// One producer send for all of them (the statuses of a run of deliveries), bypassing the
    /// gathering of `StatusWriteBatcher`; each record gets its own delivery report.
    public func publish(statuses: [StatusRecord]) async -> [Result<Void, any Error>] {
        guard !statuses.isEmpty else { return [] }
        let records = statuses.map { write in
            KafkaProducerRecord(topic: statusTopic, partition: write.partition, key: Array(write.status.callId.utf8),
                                value: write.status.encodedBytes(), headers: write.headers.map { KafkaHeader(key: $0.0, string: $0.1) })
        }
        var results = Array(repeating: Result<Void, any Error>.failure(StatusWriteBatcher.noResult), count: statuses.count)
        do {
            let reports = try await producer.send(records)
            for (index, report) in reports.prefix(statuses.count).enumerated() {
                results[index] = report.map { _ in () }.mapError { $0 }
            }
        } catch {
            results = Array(repeating: .failure(error), count: statuses.count)
        }
        return results
    }

    /// A record the topic will never take — too large, no such partition or topic, not authorized —
    /// is refused for good; anything else (unavailable, timed out, a fatal error the producer
    /// repairs by replacing its client) is worth retrying.
    public func classify(_ error: any Error) -> OutcomeWriteFailure {
        guard let error = error as? KafkaError else { return .retriable }
        switch error.disposition {
        case .recordRejected, .unauthorized: return .permanent(code: error.code.rawValue)
        case .retriable, .fatal, .shutdown, .permanent: return .retriable
        }
    }

    public func deadLetter(key: [UInt8]?, value: [UInt8], headers: [(String, String)], within bound: Duration?) async throws {
        let record = KafkaProducerRecord(topic: deadLetterTopic, key: key, value: value,
                                         headers: headers.map { KafkaHeader(key: $0.0, string: $0.1) })
        try await send(record, within: bound)
    }

    private func send(_ record: KafkaProducerRecord, within bound: Duration?) async throws {
        if let bound { _ = try await producer.send(record, timeout: bound) } else { _ = try await producer.send(record) }
    }
}
