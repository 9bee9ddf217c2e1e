import CRdKafka
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Locking

/// An idempotent Kafka producer whose `send` returns only after the broker acknowledged.
///
/// - `send(_:)` / `send(_:)` (batch) return delivery reports (topic, partition, offset) or
///   typed ``KafkaError``s whose ``KafkaError/persistenceStatus`` tells "not stored" from
///   "possibly stored".
/// - Back-pressure: when librdkafka's local queue is full the sender waits (bounded by
///   ``KafkaProducerConfiguration/queueFullTimeout``) instead of failing or buffering in Swift.
/// - Fatal errors (e.g. idempotence sequence desync) make sends fail with `isFatal`; the
///   owner should shut this producer down and create a new one.
///
/// Delivery reports are served by a dedicated thread that blocks in `rd_kafka_poll`
/// (started by the initializer). Run the producer as a `Service` (its `run()` ends with a
/// flush bounded by ``KafkaProducerConfiguration/flushTimeout``, then destroy) or call
/// ``shutdown()``.
public final class KafkaProducer: Service, Sendable {
    /// The configuration the producer was created with.
    public let configuration: KafkaProducerConfiguration
    let logger: Logger
    let client: RDKafkaClient
    let state = Locked(ProducerStateMachine())
    /// `rd_kafka_topic_t` handles by topic name, destroyed at shutdown.
    let topics = Locked<[String: UncheckedHandle]>([:])
    private let stopRequested = Atomic<Bool>(false)
    private let pollOneShotSignal = OneShotSignal()

    /// Creates the producer and starts its delivery-report thread.
    ///
    /// - Throws: ``KafkaError`` with code ``KafkaError/Code/configuration`` naming a rejected property.
    public init(configuration: KafkaProducerConfiguration, logger: Logger) throws(KafkaError) {
        self.configuration = configuration
        self.logger = logger
        self.client = try RDKafkaClient.create(
            type: RD_KAFKA_PRODUCER,
            properties: configuration.librdkafkaProperties,
            logger: logger,
            delegate: nil
        )
        let thread = Thread { [self] in self.pollLoop() }
        thread.name = "kafka-producer-poll"
        thread.start()
        logger.debug("kafka producer created", metadata: ["kafka.config": "\(configuration)"])
    }

    /// The fatal error raised on this producer, if any; once set, create a new producer.
    public var fatalError: KafkaError? { client.fatalError }

    /// Runs until graceful shutdown, cancellation or a fatal error, then flushes (bounded)
    /// and destroys the client.
    ///
    /// - Throws: the fatal ``KafkaError`` if one ended it (recreate the producer).
    public func run() async throws {
        let stop = client.context.stopSignal
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await stop.wait()
            } onCancel: {
                stop.finish()
            }
        } onGracefulShutdown: {
            stop.finish()
        }
        await shutdown()
        if let fatal = client.fatalError { throw fatal }
    }

    /// Stops accepting sends, waits for sends in progress to hand over their messages,
    /// flushes with ``KafkaProducerConfiguration/flushTimeout`` (messages not acknowledged by
    /// then fail with a purge error), and destroys the client. Safe to call more than once.
    public func shutdown() async {
        client.context.stopSignal.finish()
        switch state.withLock({ $0.beginShutdown() }) {
        case .done:
            return
        case .waitForOther:
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if !state.withLock({ $0.waitForFinish(continuation) }) { continuation.resume() }
            }
            return
        case .perform(let wakeSenders):
            for sender in wakeSenders { sender.resume() }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if !state.withLock({ $0.waitForDrain(continuation) }) { continuation.resume() }
        }
        state.withLock { $0.closing() }
        stopRequested.store(true, ordering: .releasing)
        wakePollThread()
        await pollOneShotSignal.wait()
        await client.destroy(deadline: configuration.destroyTimeout, name: "kafka-producer")
        let waiters = state.withLock { $0.finished() }
        for waiter in waiters { waiter.resume() }
        logger.debug("kafka producer shut down")
    }

    private func wakePollThread() {
        if let queue = rd_kafka_queue_get_main(client.handle) {
            rd_kafka_queue_yield(queue)
            rd_kafka_queue_destroy(queue)
        }
    }

    /// The delivery-report thread: blocks in `rd_kafka_poll` (woken by reports, by the timeout
    /// or by `rd_kafka_queue_yield` at shutdown), then lets senders waiting for room retry.
    private func pollLoop() {
        let handle = client.handle
        while !stopRequested.load(ordering: .acquiring) {
            rd_kafka_poll(handle, 100)
            let waiters = state.withLock { $0.takeSpaceWaiters() }
            for waiter in waiters { waiter.resume() }
        }
        // Shutdown: flush on this same thread so delivery callbacks never run concurrently.
        let flushMs = Int32(clamping: configuration.flushTimeout.milliseconds)
        if rd_kafka_flush(handle, flushMs) != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning(
                "kafka producer flush timed out; purging undelivered messages",
                metadata: ["kafka.outq": "\(rd_kafka_outq_len(handle))"]
            )
            rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
            // Purged messages get their (failed) delivery reports here.
            _ = rd_kafka_flush(handle, 1000)
            rd_kafka_poll(handle, 0)
        }
        let handles = topics.withLock { topics -> [UncheckedHandle] in
            defer { topics.removeAll() }
            return Array(topics.values)
        }
        for topic in handles { rd_kafka_topic_destroy(topic.pointer) }
        pollOneShotSignal.finish()
    }
}
