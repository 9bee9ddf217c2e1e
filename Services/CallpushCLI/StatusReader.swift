import CallContract
import CallTracing
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
    /// With `--trace`: the trace collector to read the call's spans from.
    var traceSource: URL?

    /// Prints the history (and, with ``traceSource``, the call's trace); returns how many statuses
    /// of the call were printed.
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
        let (printed, coverage) = await withTaskGroup(of: (Int, [Int32: KafkaHistoryReader.Coverage], Set<String>)?.self) { group in
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
            var outcome: (Int, [Int32: KafkaHistoryReader.Coverage], Set<String>)?
            while outcome == nil, let next = await group.next() {
                // The watchdog ends first (nil): stop the read, which then reports what it printed.
                if next == nil { group.cancelAll() } else { outcome = next }
            }
            group.cancelAll()
            if let outcome, let traceSource, !interruption.isRequested {
                await printTrace(from: traceSource, traceIDs: outcome.2)
            }
            return outcome.map { ($0.0, $0.1) } ?? (0, [:])
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
    ) async -> (Int, [Int32: KafkaHistoryReader.Coverage], Set<String>) {
        let since = Date().addingTimeInterval(-window.inSeconds)
        let table = StatusTable(json: json)
        var deliveries: [String: CallStatus.State] = [:]
        var printed = 0
        var traceIDs = Set<String>()
        let coverage = await reader.read(topic: topic, partitions: partitions, since: since, order: .oldestFirst, follow: follow) { message in
            watch.activity()
            if message.keyString == nil || message.keyString == callId,
               let status = try? CallStatus.decode(Data(message.value)), status.callId == callId, status.at >= since {
                if printed == 0 && !json { output.line(table.header) }
                output.line(table.row(status))
                printed += 1
                deliveries["\(status.deviceKey ?? status.deviceId ?? "-")#\(status.replay)"] = status.state
                if traceSource != nil, let parent = TraceParent(kafkaHeaders: message.headers) { traceIDs.insert(parent.traceID) }
                watch.allTerminal(!deliveries.isEmpty && deliveries.values.allSatisfy(\.isTerminal))
            }
            return true
        }
        return (printed, coverage, traceIDs)
    }

    /// Prints the call's spans from the trace collector as a timeline; when the collector cannot
    /// be asked, says so and prints the trace ids the statuses carry.
    private func printTrace(from source: URL, traceIDs: Set<String>) async {
        let query = (["callId=\(callId)"] + traceIDs.sorted().map { "traceId=\($0)" }).joined(separator: "&")
        do {
            let answer = try await HTTPExchange(baseURL: source, timeout: .seconds(5)).send(.GET, "/v1/spans?" + query)
            guard answer.status == 200 else { throw CLIError("trace-collector", "it answered \(answer.status)") }
            let spans = try JSONDecoder().decode([CollectedSpan].self, from: Data(answer.body))
            output.line("")
            if spans.isEmpty {
                output.line("no spans of this call at \(source.absoluteString) (traced statuses: \(traceIDs.isEmpty ? "none" : traceIDs.sorted().joined(separator: ", ")))")
            }
            for line in TraceTimeline.render(spans) { output.line(line) }
        } catch {
            output.error("callpush status: cannot read spans from \(source.absoluteString) (\(error)); `callpush dev` runs a trace collector, "
                         + "else look the trace up in your tracing backend: \(traceIDs.isEmpty ? "the statuses carry no trace id" : "trace " + traceIDs.sorted().joined(separator: ", "))")
        }
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
