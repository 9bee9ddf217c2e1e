import CallContract
import CallpushCore
import PushWorker
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
///
/// With `steps`, the relay also does the worker's synchronous work for each event, inline in its
/// read loop (decode and validate, device key, dedupe, ack token, VoIP payload, apns-id, the real
/// status encoded): a worker with no task, continuation or acknowledgement per event — what
/// handling events in batches could reach at best.
final class KafkaRelay: Service, Sendable {
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let pending = Locked<[KafkaProducerRecord]>([])
    let status: [UInt8]
    let steps: Bool
    let signer: AckTokenSigner
    let dedupe: PartitionDedupe

    init(kafka: KafkaConfiguration, partitions: Int, steps: Bool = false, logger: Logger) async throws {
        self.steps = steps
        signer = try AckTokenSigner(secret: Array(repeating: 1, count: 32))
        dedupe = PartitionDedupe(retention: .seconds(600), capacity: 1_000_000)
        for partition in 0..<Int32(partitions) { dedupe.install(dedupe.makeStore(), partition: partition) }
        consumer = try KafkaConsumer(configuration: KafkaConsumerConfiguration(kafka: kafka, mode: .manual), logger: logger)
        try await consumer.assign((0..<Int32(partitions)).map {
            KafkaPartitionAssignment(topic: Topics.requests, partition: $0, start: .beginning)
        })
        producer = try KafkaProducer(configuration: KafkaProducerConfiguration(kafka: kafka, deliveryTimeout: .seconds(30),
                                                                                linger: .milliseconds(1)), logger: logger)
        // A status like the worker's for a sent push (same fields, same size).
        let ring = WorkerBenchmark.ring(callId: CallID.make(), token: String(repeating: "ab", count: 32), now: Date())
        let deviceKey = DeviceKey.make(token: ring.device.token)
        let apnsID = APNSID.make(callId: ring.callId, deviceKey: deviceKey, replay: 0)
        status = Array(try WorkerBenchmark.sentStatus(ring, deviceKey: deviceKey, apnsID: apnsID, at: Date()).encoded())
    }

    func run() async throws {
        // Graceful shutdown ends the read loop with a CancellationError; the clients still close below.
        try? await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: .milliseconds(1))
                    self.flush()
                }
            }
            defer { group.cancelAll() }
            try await cancelWhenGracefulShutdown {
                for try await message in self.consumer.messages {
                    let value = self.steps ? try self.work(message) : self.status
                    let record = KafkaProducerRecord(topic: Topics.status, partition: message.partition, key: message.key, value: value)
                    if self.pending.withLock({ $0.append(record); return $0.count }) >= 256 { self.flush() }
                }
            }
        }
        await consumer.shutdown()
        await producer.shutdown()
    }

    /// The worker's synchronous steps for one ring; its `sent` status.
    private func work(_ message: KafkaConsumerMessage) throws -> [UInt8] {
        guard case .ring(let ring) = try CallRequest.decode(message.value) else { return status }
        let deviceKey = DeviceKey.make(token: ring.device.token)
        _ = dedupe.store(for: message.partition).insert(DeliveryKey(callId: ring.callId, deviceKey: deviceKey, replay: ring.replay),
                                                        ringDeadline: ring.ringDeadline)
        let ackToken = signer.token(callId: ring.callId, deviceKey: deviceKey)
        _ = try VoIPPayload(ring: ring, deviceKey: deviceKey, ackToken: ackToken).encoded()
        let apnsID = APNSID.make(callId: ring.callId, deviceKey: deviceKey, replay: ring.replay)
        return Array(try WorkerBenchmark.sentStatus(ring, deviceKey: deviceKey, apnsID: apnsID, at: Date()).encoded())
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
