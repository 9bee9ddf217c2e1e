import CallContract
import Foundation
import Kafka
import Logging
import Locking

/// Reads one call's statuses from the status topic (every partition, from now − window) and
/// prints them as they are read: to the end captured at start, or with ``follow`` until every
/// delivery seen is terminal.
struct StatusReader: Sendable {
    var kafka: ResolvedKafka
    var callId: String
    var window: Duration
    var follow = false
    var json = false
    /// With ``follow``: how long to keep waiting once every delivery seen is terminal, for
    /// statuses of other devices of the call.
    var settle: Duration = .seconds(2)
    /// Without ``follow``: reading ends if no record arrives for this long before the end.
    var idleTimeout: Duration = .seconds(10)
    var logger: Logger
    var output: CommandOutput
    var interruption = Interruption()

    /// Prints the history; returns how many statuses of the call were printed.
    func run() async throws -> Int {
        let cluster = try await kafka.describeCluster(logger: logger)
        let topic = kafka.topics.status
        let partitions = try ResolvedKafka.partitions(of: topic, in: cluster, flag: "--topic-status")
        let consumer: KafkaConsumer
        do {
            var configuration = KafkaConsumerConfiguration(kafka: kafka.configuration, mode: .manual, closeTimeout: .seconds(5))
            configuration.kafka.properties["fetch.wait.max.ms"] = configuration.kafka.properties["fetch.wait.max.ms"] ?? "100"
            consumer = try KafkaConsumer(configuration: configuration, logger: logger)
        } catch {
            throw CLIError.usage("Kafka configuration: \(error.message)")
        }
        do {
            let count = try await read(consumer: consumer, topic: topic, partitions: partitions)
            await consumer.shutdown()
            return count
        } catch {
            await consumer.shutdown()
            throw error
        }
    }

    private func read(consumer: KafkaConsumer, topic: String, partitions: Int) async throws -> Int {
        let since = Date().addingTimeInterval(-window.seconds)
        var assignments: [KafkaPartitionAssignment] = []
        var ends: [Int32: Int64] = [:]
        for partition in 0..<Int32(partitions) {
            do {
                let start = try await consumer.startOffset(topic: topic, partition: partition,
                                                           notBefore: Int64(since.timeIntervalSince1970 * 1000), timeout: kafka.connectTimeout)
                let end = try await consumer.queryWatermarks(topic: topic, partition: partition, timeout: kafka.connectTimeout).high
                if start < end { ends[partition] = end }
                if follow || start < end { assignments.append(KafkaPartitionAssignment(topic: topic, partition: partition, start: .offset(start))) }
            } catch {
                throw CLIError.kafka("reading the offsets of \(topic)[\(partition)]", error)
            }
        }
        let table = StatusTable(json: json)
        guard !assignments.isEmpty else { return 0 }
        do {
            try await consumer.assign(assignments)
        } catch {
            throw CLIError.kafka("assigning \(topic)", error)
        }
        let watch = StatusWatch()
        let watchdog = Task { [follow, settle, idleTimeout, interruption] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                if interruption.isRequested || watch.shouldStop(follow: follow, settle: settle, idle: idleTimeout) {
                    await consumer.shutdown()
                    return
                }
            }
        }
        defer { watchdog.cancel() }

        var deliveries: [String: CallStatus.State] = [:]
        var caughtUp = Set<Int32>()
        var printed = 0
        do {
            for try await message in consumer.messages {
                watch.activity()
                if let end = ends[message.partition], message.offset + 1 >= end { caughtUp.insert(message.partition) }
                if message.keyString == nil || message.keyString == callId,
                   let status = try? CallStatus.decode(Data(message.value)), status.callId == callId, status.at >= since {
                    if printed == 0 && !json { output.line(table.header) }
                    output.line(table.row(status))
                    printed += 1
                    deliveries["\(status.deviceKey ?? status.deviceId ?? "-")#\(status.replay)"] = status.state
                    watch.allTerminal(!deliveries.isEmpty && deliveries.values.allSatisfy(\.isTerminal))
                }
                if !follow, caughtUp.count == ends.count { break }
            }
        } catch {
            throw CLIError("kafka-error", "reading \(topic): \(error)")
        }
        return printed
    }
}

/// What the status watchdog knows: when a record last arrived and since when every delivery is terminal.
final class StatusWatch: Sendable {
    private struct State {
        var lastActivity = ContinuousClock.now
        var allTerminalSince: ContinuousClock.Instant?
    }
    private let state = Locked(State())

    func activity() { state.withLock { $0.lastActivity = .now } }

    func allTerminal(_ value: Bool) {
        state.withLock { state in
            if !value { state.allTerminalSince = nil } else if state.allTerminalSince == nil { state.allTerminalSince = .now }
        }
    }

    func shouldStop(follow: Bool, settle: Duration, idle: Duration) -> Bool {
        state.withLock { state in
            let now = ContinuousClock.now
            if follow {
                guard let since = state.allTerminalSince else { return false }
                return now - since >= settle && now - state.lastActivity >= settle
            }
            return now - state.lastActivity > idle
        }
    }
}
