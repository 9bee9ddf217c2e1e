import CallContract
import Foundation
import Kafka
import Locking
import Logging
import ServiceLifecycle

/// `--kafka-floor`: a stand-in for the worker that does no work of its own. It reads every ring
/// event (manual assignment of all request partitions), writes a `sent` status of the worker's
/// size to the same partition number of the status topic for each, batched (up to 256 records per
/// send, flushed every millisecond), and does nothing else: no decode, no dedupe, no push, no
/// per-event task. A saturation run with it measures what Kafka alone costs end to end here — the
/// benchmark's producer, the embedded brokers, this consumer and producer, the status reader — the
/// floor under any worker built on librdkafka on this cluster.
final class KafkaRelay: Service, Sendable {
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let pending = Locked<[KafkaProducerRecord]>([])
    let status: [UInt8]

    init(kafka: KafkaConfiguration, partitions: Int, logger: Logger) async throws {
        consumer = try KafkaConsumer(configuration: KafkaConsumerConfiguration(kafka: kafka, mode: .manual), logger: logger)
        try await consumer.assign((0..<Int32(partitions)).map {
            KafkaPartitionAssignment(topic: Topics.requests, partition: $0, start: .beginning)
        })
        producer = try KafkaProducer(configuration: KafkaProducerConfiguration(kafka: kafka, deliveryTimeout: .seconds(30),
                                                                                linger: .milliseconds(1)), logger: logger)
        // A status like the worker's for a sent push (same fields, same size).
        let now = Date()
        let sent = CallStatus(callId: CallID.make(), deviceId: nil, deviceKey: String(repeating: "d", count: 64), app: "bench",
                              state: .sent, attempt: 1, replay: 0, at: now,
                              apns: .init(id: UUID.randomVersion4().uuidString.lowercased(), status: 200, timestamp: now), worker: "bench-0")
        status = Array(try sent.encoded())
    }

    func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: .milliseconds(1))
                    self.flush()
                }
            }
            try await cancelWhenGracefulShutdown {
                for try await message in self.consumer.messages {
                    let record = KafkaProducerRecord(topic: Topics.status, partition: message.partition, key: message.key, value: self.status)
                    if self.pending.withLock({ $0.append(record); return $0.count }) >= 256 { self.flush() }
                }
            }
            group.cancelAll()
        }
        await consumer.shutdown()
        await producer.shutdown()
    }

    private func flush() {
        let batch = pending.withLock { pending -> [KafkaProducerRecord] in
            defer { pending.removeAll(keepingCapacity: true) }
            return pending
        }
        guard !batch.isEmpty else { return }
        let producer = self.producer
        Task { _ = try? await producer.send(batch) }
    }
}
