import CallContract
import CallTracing
import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Synchronization
import Tracing
import Locking

/// Feeds the ``StatusView`` from Kafka: every partition of the requests and status topics, read
/// with one ``KafkaHistoryReader`` from `now − window` (offsets-for-times) and then followed (no
/// consumer group, so every instance sees everything). Partition counts are found by probing
/// partition numbers until the broker knows no more. Ready once every partition is located;
/// retries (with backoff) until then.
public final class StatusViewReader: Service {
    private let kafka: KafkaConfiguration
    private let requestsTopic: String
    private let statusTopic: String
    private let window: Duration
    private let view: StatusView
    private let metrics: DispatchMetrics?
    private let logger: Logger
    private let ready = Atomic<Bool>(false)
    private let partitionCounts = Locked<[String: Int]>([:])
    /// Ring events with this `callpush-origin` were published (and applied to the view) by this
    /// process: they are not decoded again.
    private let ownOrigin: [UInt8]?
    /// Traces statuses written to SSE streams (off by default).
    private let tracing: CallTracing

    public init(kafka: KafkaConfiguration, requestsTopic: String, statusTopic: String, window: Duration, view: StatusView,
                metrics: DispatchMetrics? = nil, ownOrigin: [UInt8]? = nil, tracing: CallTracing = .off, logger: Logger) {
        self.ownOrigin = ownOrigin
        self.tracing = tracing
        self.kafka = kafka
        self.requestsTopic = requestsTopic
        self.statusTopic = statusTopic
        self.window = window
        self.view = view
        self.metrics = metrics
        self.logger = logger
    }

    /// True once every partition of both topics is located (and reading starts).
    public var isReady: Bool { ready.load(ordering: .acquiring) }

    /// Partition count per topic, once known.
    public func partitionCount(_ topic: String) -> Int? { partitionCounts.withLock { $0[topic] } }

    public func run() async throws {
        var configuration = KafkaConsumerConfiguration(kafka: kafka, mode: .manual)
        configuration.kafka.clientID = kafka.clientID + "-dispatch-view"
        configuration.maxBufferedMessages = 5_000
        let reader = KafkaHistoryReader(configuration: configuration, logger: logger)
        let probe = try KafkaConsumer(configuration: configuration, logger: logger)
        try await cancelWhenGracefulShutdown { [self] in
            var delay = Duration.milliseconds(200)
            var counted: [KafkaTopicPartition]?
            while !Task.isCancelledOrShuttingDown {
                do {
                    let partitions: [KafkaTopicPartition]
                    if let counted {
                        partitions = counted
                    } else {
                        partitions = try await countPartitions(probe)
                        counted = partitions
                        await probe.shutdown()
                    }
                    try await read(reader, partitions: partitions)
                    return
                } catch let error as StatusViewStopped {
                    throw error
                } catch {
                    logger.warning("status view cannot assign partitions yet; retrying", metadata: ["kafka.error": "\(error)"])
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(5))
                }
            }
        }
        await probe.shutdown()
    }

    /// Counts the partitions of both topics (remembered for ``partitionCount(_:)``).
    private func countPartitions(_ consumer: KafkaConsumer) async throws(KafkaError) -> [KafkaTopicPartition] {
        var partitions: [KafkaTopicPartition] = []
        for topic in [requestsTopic, statusTopic] {
            let count = try await Self.partitions(of: topic, consumer: consumer)
            partitionCounts.withLock { $0[topic] = count }
            partitions += (0..<Int32(count)).map { KafkaTopicPartition(topic: topic, partition: $0) }
        }
        return partitions
    }

    /// Reads every partition from now − window, then follows them until cancelled. Throws the
    /// partitions that could not be located (the caller tries again), or ``StatusViewStopped``
    /// when the read ended on its own after the view was ready.
    private func read(_ reader: KafkaHistoryReader, partitions: [KafkaTopicPartition]) async throws {
        var unlocated: [KafkaTopicPartition: KafkaError] = [:]
        let since = Date().addingTimeInterval(-window.inSeconds)
        _ = await reader.read(partitions: partitions, since: since, order: .oldestFirst, follow: true, located: { failed in
            unlocated = failed
            guard failed.isEmpty else { return false }
            assigned()
            return true
        }) { message in
            apply(message)
            return true
        }
        if let (partition, error) = unlocated.min(by: { ($0.key.topic, $0.key.partition) < ($1.key.topic, $1.key.partition) }) {
            var error = error
            error.message = "\(partition): \(error.message)"
            throw error
        }
        if !Task.isCancelledOrShuttingDown { throw StatusViewStopped() }
    }

    private func assigned() {
        ready.store(true, ordering: .releasing)
        logger.info("status view assigned", metadata: [
            "kafka.requests.partitions": "\(partitionCount(requestsTopic) ?? 0)",
            "kafka.status.partitions": "\(partitionCount(statusTopic) ?? 0)",
        ])
        if partitionCount(requestsTopic) != partitionCount(statusTopic) {
            logger.warning("requests and status topics have different partition counts; co-partitioning by key is not guaranteed")
        }
    }

    /// Probes partition numbers 0, 1, … until the broker has no such partition.
    static func partitions(of topic: String, consumer: KafkaConsumer) async throws(KafkaError) -> Int {
        _ = try await consumer.queryWatermarks(topic: topic, partition: 0, timeout: .seconds(5))
        var count = 1
        while count < 100_000 {
            do {
                _ = try await consumer.queryWatermarks(topic: topic, partition: Int32(count), timeout: .seconds(2))
                count += 1
            } catch {
                break
            }
        }
        return count
    }

    /// Applies a message of the window (the reader skips older ones).
    private func apply(_ message: KafkaConsumerMessage) {
        metrics?.viewEvent()
        if message.topic == statusTopic {
            guard let status = try? CallStatus.decode(Data(message.value)) else { return }
            let started = tracing.isOn ? DefaultTracerClock.now : nil
            let streams = view.apply(status: status, partition: message.partition, offset: message.offset)
            if let started, streams > 0 { traceStreamed(status, message: message, streams: streams, started: started) }
        } else if message.topic == requestsTopic {
            if let ownOrigin, message.header(DispatchAPI.originHeader)?.value == ownOrigin { return }
            guard case .ring(let ring)? = try? CallRequest.decode(message.value) else { return }
            view.apply(rings: [ring], partition: message.partition)
        }
        metrics?.setViewCalls(view.count)
    }
}

extension StatusViewReader {
    /// A `stream status` span, child of the worker's status write, for a status this instance
    /// wrote to SSE streams following the call.
    private func traceStreamed(_ status: CallStatus, message: KafkaConsumerMessage, streams: Int, started: DefaultTracerClock.Instant) {
        guard let span = tracing.startSpan(SpanName.streamStatus, continuing: TraceParent(kafkaHeaders: message.headers),
                                           kind: .consumer, at: started) else { return }
        span.attributes[SpanAttributeName.callID] = status.callId
        span.attributes[SpanAttributeName.state] = status.state.rawValue
        span.attributes[SpanAttributeName.streams] = streams
        span.attributes[SpanAttributeName.partition] = "\(message.partition)"
        span.attributes[SpanAttributeName.offset] = Int(message.offset)
        span.end()
    }
}

/// The status view's read ended although the service was not stopping (the consumer failed).
struct StatusViewStopped: Error, CustomStringConvertible {
    var description: String { "the status view stopped reading Kafka" }
}

extension Task where Success == Never, Failure == Never {
    static var isCancelledOrShuttingDown: Bool { Task.isCancelled || Task.isShuttingDownGracefully }
}
