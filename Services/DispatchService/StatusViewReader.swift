import CallContract
import CallTracing
import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Synchronization
import Tracing
import Locking

/// Feeds the ``StatusView`` from Kafka: every partition of the requests and status topics,
/// by manual assignment (no consumer group, so every instance sees everything), starting at
/// `now − window` (offsets-for-times). Partition counts are found by probing partition numbers
/// until the broker knows no more. Ready once assigned; retries (with backoff) until then.
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

    /// True once every partition of both topics is assigned.
    public var isReady: Bool { ready.load(ordering: .acquiring) }

    /// Partition count per topic, once known.
    public func partitionCount(_ topic: String) -> Int? { partitionCounts.withLock { $0[topic] } }

    public func run() async throws {
        var configuration = KafkaConsumerConfiguration(kafka: kafka, mode: .manual)
        configuration.kafka.clientID = kafka.clientID + "-dispatch-view"
        configuration.maxBufferedMessages = 5_000
        let consumer = try KafkaConsumer(configuration: configuration, logger: logger)
        try await withGracefulShutdownHandler {
            var delay = Duration.milliseconds(200)
            var sinceMs: Int64 = 0
            while !Task.isCancelledOrShuttingDown {
                do {
                    sinceMs = try await assignAll(consumer)
                    break
                } catch {
                    logger.warning("status view cannot assign partitions yet; retrying", metadata: ["kafka.error": "\(error)"])
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(5))
                }
            }
            guard isReady else { return }
            for try await message in consumer.messages {
                apply(message, sinceMs: sinceMs)
            }
        } onGracefulShutdown: {
            Task { await consumer.shutdown() }
        }
        await consumer.shutdown()
    }

    private func assignAll(_ consumer: KafkaConsumer) async throws -> Int64 {
        let sinceMs = Int64((Date().timeIntervalSince1970 - window.seconds) * 1000)
        var assignments: [KafkaPartitionAssignment] = []
        for topic in [requestsTopic, statusTopic] {
            let count = try await Self.partitions(of: topic, consumer: consumer)
            partitionCounts.withLock { $0[topic] = count }
            for partition in 0..<Int32(count) {
                let start = try await consumer.startOffset(topic: topic, partition: partition, notBefore: sinceMs, timeout: .seconds(5))
                assignments.append(KafkaPartitionAssignment(topic: topic, partition: partition, start: .offset(start)))
            }
        }
        try await consumer.assign(assignments)
        ready.store(true, ordering: .releasing)
        logger.info("status view assigned", metadata: [
            "kafka.requests.partitions": "\(partitionCount(requestsTopic) ?? 0)",
            "kafka.status.partitions": "\(partitionCount(statusTopic) ?? 0)",
        ])
        if partitionCount(requestsTopic) != partitionCount(statusTopic) {
            logger.warning("requests and status topics have different partition counts; co-partitioning by key is not guaranteed")
        }
        return sinceMs
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

    private func apply(_ message: KafkaConsumerMessage, sinceMs: Int64) {
        if let timestamp = message.timestampMilliseconds, timestamp < sinceMs { return }
        metrics?.viewEvent()
        if message.topic == statusTopic {
            guard let status = try? CallStatus.decode(Data(message.value)) else { return }
            let started = tracing.isOn ? DefaultTracerClock.now : nil
            let streams = view.apply(status: status, partition: message.partition, offset: message.offset)
            if let started, streams > 0 { traceStreamed(status, message: message, streams: streams, started: started) }
        } else if message.topic == requestsTopic {
            if let ownOrigin, message.header(DispatchAPI.originHeader)?.value == ownOrigin { return }
            guard case .ring(let ring)? = try? CallRequest.decode(Data(message.value)) else { return }
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

extension Task where Success == Never, Failure == Never {
    static var isCancelledOrShuttingDown: Bool { Task.isCancelled || Task.isShuttingDownGracefully }
}
