import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Locking

/// Where dispatch publishes events: a seam so the HTTP layer can be tested without Kafka.
public protocol EventPublishing: Sendable {
    /// Publishes every record and returns once all were acknowledged: the partition each was
    /// stored in, in order.
    ///
    /// - Throws: a 503 ``DispatchProblem`` when any record was not acknowledged within the bound.
    func publish(_ records: [KafkaProducerRecord]) async throws(DispatchProblem) -> [Int32]
}

/// The idempotent Kafka producer behind dispatch, with every publish bounded by
/// `publishTimeout` (librdkafka's `message.timeout.ms` is set to the same bound, so an event that
/// was not acknowledged in time is dropped by librdkafka rather than delivered late).
/// A producer that hits a fatal error is replaced by a new one.
public final class DispatchProducer: EventPublishing, Service {
    private let configuration: KafkaProducerConfiguration
    private let publishTimeout: Duration
    private let retryAfter: Int
    private let logger: Logger
    private let current: Locked<KafkaProducer>
    private let metrics: DispatchMetrics?

    /// Creates the producer (`message.timeout.ms` = `publishTimeout`).
    public init(kafka: KafkaConfiguration, publishTimeout: Duration, retryAfterSeconds: Int,
                metrics: DispatchMetrics? = nil, logger: Logger) throws(KafkaError) {
        var configuration = KafkaProducerConfiguration(kafka: kafka)
        configuration.deliveryTimeout = publishTimeout
        configuration.queueFullTimeout = publishTimeout
        // 5 ms, not 1: batching is what moves a ring's CPU (fewer produce requests, delivery-report
        // wake-ups and message sets for the brokers and the view's fetches), at the cost of at most
        // the linger in latency when idle; a ring's budget is seconds (the figures are in
        // docs/benchmarks.md). `CALLPUSH_KAFKA_LINGER_MS` overrides it.
        configuration.linger = .milliseconds(5)
        configuration.flushTimeout = .seconds(5)
        configuration.kafka.clientID = kafka.clientID + "-dispatch"
        self.configuration = configuration
        self.publishTimeout = publishTimeout
        self.retryAfter = retryAfterSeconds
        self.logger = logger
        self.metrics = metrics
        self.current = Locked(try KafkaProducer(configuration: configuration, logger: logger))
    }

    /// True unless the producer hit a fatal error that could not be repaired.
    public var isHealthy: Bool { current.withLock { $0.fatalError == nil } }

    /// Publishes, bounded by the publish timeout (plus a short grace for the delivery report).
    ///
    /// The bound is the Kafka layer's own (an entry in its shared deadline sweeper), not a task per
    /// publish racing a deadline: that task, its continuation and its deadline entry were a
    /// measurable share of the ring path's CPU. Either way a record is answered only once librdkafka
    /// reported its acknowledgement; unanswered at the bound, it is a 503.
    public func publish(_ records: [KafkaProducerRecord]) async throws(DispatchProblem) -> [Int32] {
        let producer = currentProducer()
        let results: [Result<KafkaDeliveryReport, KafkaError>]
        do {
            results = try await producer.send(records, timeout: publishTimeout + .milliseconds(500))
        } catch {
            metrics?.publishFailure()
            logger.warning("kafka publish failed", metadata: ["kafka.error": "\(error)", "events": "\(records.count)"])
            if producer.fatalError != nil { replace(producer) }
            throw DispatchProblem.unavailable(retryAfter: retryAfter, detail: "Kafka did not acknowledge every event")
        }
        if results.contains(where: { if case .failure(let error) = $0 { error.code == .timeout } else { false } }) {
            throw DispatchProblem.unavailable(retryAfter: retryAfter, detail: "Kafka did not acknowledge within \(publishTimeout)")
        }
        var partitions: [Int32] = []
        partitions.reserveCapacity(results.count)
        do {
            for result in results {
                let report = try result.get()
                partitions.append(report.partition)
                // librdkafka acknowledges a record without an offset when a later request of its
                // partition succeeded after this one's request failed uncertainly (timeout,
                // connection lost): a broker that checks idempotent sequence numbers stored it. The
                // embedded cluster does not check them (docs/kafka.md), so this line is what tells
                // such an acknowledgement apart when a campaign looks for a lost call.
                if report.offset < 0 {
                    logger.notice("kafka acknowledged a record without an offset", metadata: [
                        "kafka.topic": "\(report.topic)", "kafka.partition": "\(report.partition)",
                        "call.id": "\(records.first?.key.map { String(decoding: $0, as: UTF8.self) } ?? "-")",
                    ])
                }
            }
        } catch {
            metrics?.publishFailure()
            logger.warning("kafka publish failed", metadata: ["kafka.error": "\(error)", "events": "\(records.count)"])
            if producer.fatalError != nil { replace(producer) }
            throw DispatchProblem.unavailable(retryAfter: retryAfter, detail: "Kafka did not acknowledge every event")
        }
        return partitions
    }

    /// Runs until graceful shutdown, then flushes and closes the producer.
    public func run() async throws {
        try? await gracefulShutdown()
        await currentProducer().shutdown()
    }

    private func currentProducer() -> KafkaProducer { current.withLock { $0 } }

    private func replace(_ broken: KafkaProducer) {
        let fresh: KafkaProducer
        do {
            fresh = try KafkaProducer(configuration: configuration, logger: logger)
        } catch {
            logger.error("cannot recreate the kafka producer", metadata: ["kafka.error": "\(error)"])
            return
        }
        let swapped = current.withLock { producer -> Bool in
            guard producer === broken else { return false }
            producer = fresh
            return true
        }
        logger.error("kafka producer hit a fatal error; replaced it")
        Task { await (swapped ? broken : fresh).shutdown() }
    }
}
