import CallContract
import Foundation
import Kafka
import Logging
import Locking

/// Reads `voip.call-status`, the DLQ and `voip.call-requests` from the beginning (manual
/// assignment, nothing committed) for the whole campaign: every status per delivery, when the
/// first `sent` was seen, every dead-lettered record, and where each call's events are (so a
/// lost delivery can be traced to the partition, offset and worker logs).
final class OutcomeCollector: Sendable {
    struct DeadLetter: Sendable {
        var key: [UInt8]?
        var value: [UInt8]
        var headers: [String: String]
    }

    private struct State {
        var statuses: [String: [CallStatus]] = [:]   // "callId|deviceKey"
        var firstSent: [String: ContinuousClock.Instant] = [:]
        var sentPerSecond: [Int: Int] = [:]           // seconds since start → sent statuses
        var deadLetters: [DeadLetter] = []
        var requestPositions: [String: [String]] = [:]  // callId → "p<partition>@<offset>" of its events
    }

    private let consumer: KafkaConsumer
    private let state = Locked(State())
    private let started = ContinuousClock.now
    private let reading = Locked<Task<Void, Never>?>(nil)

    init(bootstrap: String, logger: Logger) async throws {
        let kafka = KafkaConfiguration(bootstrapServers: [bootstrap], clientID: "campaign-observer",
                                       properties: ["fetch.wait.max.ms": "10", "topic.metadata.refresh.interval.ms": "1000"])
        consumer = try KafkaConsumer(configuration: KafkaConsumerConfiguration(kafka: kafka, mode: .manual), logger: logger)
        var assignments = (0..<Int32(Stack.partitions)).map {
            KafkaPartitionAssignment(topic: Topics.status, partition: $0, start: .beginning)
        }
        assignments.append(KafkaPartitionAssignment(topic: Topics.deadLetter, partition: 0, start: .beginning))
        assignments += (0..<Int32(Stack.partitions)).map {
            KafkaPartitionAssignment(topic: Topics.requests, partition: $0, start: .beginning)
        }
        try await consumer.assign(assignments)
    }

    func start() {
        let task = Task {
            do {
                for try await message in consumer.messages { record(message) }
            } catch {
                FileHandle.standardError.write(Data("campaign: status reader stopped: \(error)\n".utf8))
            }
        }
        reading.withLock { $0 = task }
    }

    private func record(_ message: KafkaConsumerMessage) {
        let now = ContinuousClock.now
        if message.topic == Topics.deadLetter {
            var headers: [String: String] = [:]
            for header in message.headers { headers[header.key] = header.stringValue ?? "" }
            state.withLock { $0.deadLetters.append(DeadLetter(key: message.key, value: message.value, headers: headers)) }
            return
        }
        if message.topic == Topics.requests {
            guard let callId = message.keyString else { return }
            state.withLock { $0.requestPositions[callId, default: []].append("p\(message.partition)@\(message.offset)") }
            return
        }
        guard let status = try? CallStatus.decode(Data(message.value)) else { return }
        let key = "\(status.callId)|\(status.deviceKey ?? "")"
        state.withLock { state in
            state.statuses[key, default: []].append(status)
            if status.state == .sent {
                if state.firstSent[key] == nil { state.firstSent[key] = now }
                state.sentPerSecond[Int((now - started).inSeconds), default: 0] += 1
            }
        }
    }

    /// Statuses of one delivery, in the order read.
    func statuses(callId: String, deviceKey: String) -> [CallStatus] {
        state.withLock { $0.statuses["\(callId)|\(deviceKey)"] ?? [] }
    }

    func firstSent(callId: String, deviceKey: String) -> ContinuousClock.Instant? {
        state.withLock { $0.firstSent["\(callId)|\(deviceKey)"] }
    }

    var deadLetters: [DeadLetter] { state.withLock { $0.deadLetters } }

    /// Where the call's events are in `voip.call-requests` ("p<partition>@<offset>", in order read).
    func requestPositions(callId: String) -> [String] {
        state.withLock { $0.requestPositions[callId] ?? [] }
    }

    /// `sent` statuses seen in [from, to) seconds after the collector started.
    func sentBetween(_ from: Int, _ to: Int) -> Int {
        state.withLock { state in (from..<to).reduce(0) { $0 + (state.sentPerSecond[$1] ?? 0) } }
    }

    var elapsedSeconds: Double { (ContinuousClock.now - started).inSeconds }

    func stop() async {
        await consumer.shutdown()
        let task = reading.withLock { $0 }
        await task?.value
    }
}


