import CallContract
import Foundation
import Kafka
import Logging
import Locking

/// Reads one call's statuses from the status topic (every partition, from now − window; oldest
/// first, with ``KafkaHistoryReader``) and prints them as they are read: to the end captured at
/// start, or with ``follow`` until every delivery seen is terminal.
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
        var configuration = KafkaConsumerConfiguration(kafka: kafka.configuration, mode: .manual, closeTimeout: .seconds(5))
        configuration.kafka.properties["fetch.wait.max.ms"] = configuration.kafka.properties["fetch.wait.max.ms"] ?? "100"
        var reader = KafkaHistoryReader(configuration: configuration, logger: logger)
        reader.lookupTimeout = kafka.connectTimeout
        let watch = StatusWatch()
        // The read runs in a child task so that the watchdog can end it (cancellation) when the
        // call's deliveries settled, the input went idle, or the user interrupted.
        let (printed, coverage) = await withTaskGroup(of: (Int, [Int32: KafkaHistoryReader.Coverage])?.self) { group in
            group.addTask { [self, reader] in
                await read(reader, topic: topic, partitions: Array(0..<Int32(partitions)), watch: watch)
            }
            group.addTask { [follow, settle, idleTimeout, interruption] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(100))
                    if interruption.isRequested || watch.shouldStop(follow: follow, settle: settle, idle: idleTimeout) { return nil }
                }
                return nil
            }
            var outcome: (Int, [Int32: KafkaHistoryReader.Coverage])?
            while outcome == nil, let next = await group.next() {
                // The watchdog ends first (nil): stop the read, which then reports what it printed.
                if next == nil { group.cancelAll() } else { outcome = next }
            }
            group.cancelAll()
            return outcome ?? (0, [:])
        }
        for partition in coverage.keys.sorted() {
            if case .failed(let error) = coverage[partition] {
                throw CLIError.kafka("reading the offsets of \(topic)[\(partition)]", error)
            }
        }
        return printed
    }

    private func read(
        _ reader: KafkaHistoryReader, topic: String, partitions: [Int32], watch: StatusWatch
    ) async -> (Int, [Int32: KafkaHistoryReader.Coverage]) {
        let since = Date().addingTimeInterval(-window.seconds)
        let table = StatusTable(json: json)
        var deliveries: [String: CallStatus.State] = [:]
        var printed = 0
        let coverage = await reader.read(topic: topic, partitions: partitions, since: since, order: .oldestFirst, follow: follow) { message in
            watch.activity()
            if message.keyString == nil || message.keyString == callId,
               let status = try? CallStatus.decode(Data(message.value)), status.callId == callId, status.at >= since {
                if printed == 0 && !json { output.line(table.header) }
                output.line(table.row(status))
                printed += 1
                deliveries["\(status.deviceKey ?? status.deviceId ?? "-")#\(status.replay)"] = status.state
                watch.allTerminal(!deliveries.isEmpty && deliveries.values.allSatisfy(\.isTerminal))
            }
            return true
        }
        return (printed, coverage)
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
