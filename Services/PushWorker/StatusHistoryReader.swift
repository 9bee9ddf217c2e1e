import CallContract
import Foundation
import Kafka
import Logging

/// Rebuilds dedupe state for newly assigned partitions by reading the co-partitioned status
/// partitions from `now − window` (offsets-for-times) to their end, so a new owner of a
/// partition does not push again what the previous owner already finished.
public struct StatusHistoryReader: Sendable {
    public var kafka: KafkaConfiguration
    public var statusTopic: String
    /// How far back to read; must cover the longest ring window plus redelivery delays.
    public var window: Duration
    /// Bound on one rebuild; a partial rebuild is logged, never fatal.
    public var timeout: Duration
    public var logger: Logger

    /// States after which a delivery must not be pushed again. `retrying` alone is not one: the
    /// previous owner may have died before any push was accepted. Nor is `duplicate`: it says another
    /// copy of the event was handled *or still in progress* when it was written, and a copy in
    /// progress may since have been handed back without an outcome; a handled copy left its own
    /// status, which is what counts.
    static let handledStates: Set<CallStatus.State> = [.sent, .failed, .expired, .cancelled, .rejected]

    public init(kafka: KafkaConfiguration, statusTopic: String, window: Duration, timeout: Duration, logger: Logger) {
        self.kafka = kafka
        self.statusTopic = statusTopic
        self.window = window
        self.timeout = timeout
        self.logger = logger
    }

    /// Reads the status history of `partitions`: `handled` gets each delivery in a handled state
    /// (and until when to remember it), `cancelled` each call-level cancel marker.
    public func rebuild(partitions: [Int32], now: Date, handled: (Int32, DeliveryKey, Date) -> Void,
                        cancelled: (Int32, String, Date) -> Void) async -> [Int32: StatusHistoryCoverage] {
        var coverage = Dictionary(uniqueKeysWithValues: partitions.map { ($0, StatusHistoryCoverage.complete) })
        guard !partitions.isEmpty else { return coverage }
        let started = ContinuousClock.now
        let consumer: KafkaConsumer
        do {
            var configuration = KafkaConsumerConfiguration(kafka: kafka, mode: .manual)
            configuration.kafka.clientID = kafka.clientID + "-status-history"
            configuration.maxBufferedMessages = 5_000
            consumer = try KafkaConsumer(configuration: configuration, logger: logger)
        } catch {
            logger.error("cannot read status history; dedupe starts empty", metadata: ["error": "\(error)"])
            return coverage.mapValues { _ in .failed(reason: "\(error)") }
        }

        var ends: [Int32: Int64] = [:]
        var assignments: [KafkaPartitionAssignment] = []
        let sinceMs = Int64((now.timeIntervalSince1970 - window.seconds) * 1000)
        // One bound for the whole rebuild: each look-up gets what is left of it.
        let deadline = started + timeout
        func remaining() -> Duration { max(.milliseconds(1), deadline - ContinuousClock.now) }
        for partition in partitions {
            do {
                let marks = try await consumer.queryWatermarks(topic: statusTopic, partition: partition, timeout: remaining())
                let start = try await consumer.startOffset(topic: statusTopic, partition: partition,
                                                           notBefore: sinceMs, timeout: remaining())
                if start < marks.high {
                    ends[partition] = marks.high
                    assignments.append(KafkaPartitionAssignment(topic: statusTopic, partition: partition, start: .offset(max(start, marks.low))))
                }
            } catch {
                logger.error("cannot locate status history", metadata: ["kafka.partition": "\(partition)", "error": "\(error)"])
                coverage[partition] = .failed(reason: "\(error)")
            }
        }

        var read = 0
        if !assignments.isEmpty {
            do {
                try await consumer.assign(assignments)
                read = try await readUntilEnds(consumer, ends: &ends, sinceMs: sinceMs, deadline: deadline, handled: handled, cancelled: cancelled)
            } catch {
                logger.error("status history read failed; dedupe is partial", metadata: ["error": "\(error)"])
            }
        }
        for partition in ends.keys { coverage[partition] = .partial(reachedBack: nil) }
        if !ends.isEmpty {
            logger.error("status history not fully read within the bound; dedupe is partial",
                           metadata: ["kafka.partitions": "\(ends.keys.sorted())"])
        }
        await consumer.shutdown()
        logger.info("dedupe rebuilt from status history", metadata: [
            "kafka.partitions": "\(partitions.sorted())", "statuses.read": "\(read)",
            "duration.ms": "\(Int((ContinuousClock.now - started).seconds * 1000))",
        ])
        return coverage
    }

    private func readUntilEnds(_ consumer: KafkaConsumer, ends: inout [Int32: Int64], sinceMs: Int64, deadline: ContinuousClock.Instant,
                               handled: (Int32, DeliveryKey, Date) -> Void, cancelled: (Int32, String, Date) -> Void) async throws -> Int {
        var read = 0
        let timer = Task {
            try? await Task.sleep(until: deadline)
            await consumer.shutdown()
        }
        defer { timer.cancel() }
        for try await message in consumer.messages {
            read += 1
            if let status = try? CallStatus.decode(Data(message.value)), status.at.timeIntervalSince1970 * 1000 >= Double(sinceMs) {
                if let deviceKey = status.deviceKey, Self.handledStates.contains(status.state) {
                    let key = DeliveryKey(callId: status.callId, deviceKey: deviceKey, replay: status.replay)
                    handled(message.partition, key, status.at.addingTimeInterval(2 * window.seconds))
                } else if status.deviceKey == nil, status.state == .cancelled {
                    cancelled(message.partition, status.callId, status.at)
                }
            }
            if let end = ends[message.partition], message.offset + 1 >= end { ends[message.partition] = nil }
            if ends.isEmpty { break }
        }
        return read
    }
}

/// How much of a partition's status history a rebuild read.
public enum StatusHistoryCoverage: Sendable, Equatable {
    /// Everything from `now − window` to the end.
    case complete
    /// The bound ran out; the statuses from `reachedBack` on were read (nil: unknown).
    case partial(reachedBack: Date?)
    /// Nothing could be read.
    case failed(reason: String)
}
