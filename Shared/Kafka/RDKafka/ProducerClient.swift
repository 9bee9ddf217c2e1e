import CRdKafka
import Foundation
import Logging
import Synchronization
import Locking

/// One librdkafka producer: the client handle, its topic handles, the thread serving its delivery
/// reports, and the senders using it. ``KafkaProducer`` holds one and replaces it when it hits a
/// fatal error.
final class ProducerClient: Sendable {
    let configuration: KafkaProducerConfiguration
    let logger: Logger
    let deadlines: DeadlineSweeper
    let client: RDKafkaClient
    let state = Locked(ProducerStateMachine())
    /// `rd_kafka_topic_t` handles by topic name, destroyed at shutdown.
    let topics = Locked<[String: UncheckedHandle]>([:])
    private let stopRequested = Atomic<Bool>(false)
    private let pollThreadExit = OneShotSignal()

    /// Creates the client and starts its delivery-report thread.
    init(configuration: KafkaProducerConfiguration, logger: Logger, deadlines: DeadlineSweeper) throws(KafkaError) {
        self.configuration = configuration
        self.logger = logger
        self.deadlines = deadlines
        self.client = try RDKafkaClient.create(
            type: RD_KAFKA_PRODUCER,
            properties: configuration.librdkafkaProperties,
            logger: logger,
            delegate: nil
        )
        let thread = Thread { [self] in
            nameCurrentThreadForTheKernel("kafka-producer")
            self.pollLoop()
        }
        thread.name = "kafka-producer-poll"
        thread.start()
    }

    /// The fatal error raised on this client, if any, as its error callback recorded it (on the
    /// poll thread, before the delivery reports of the messages it purged). Never asks librdkafka:
    /// the handle may already be destroyed.
    var fatalError: KafkaError? { client.context.fatalError }

    /// Fires on a fatal error and when the client is shut down.
    var stopSignal: OneShotSignal { client.context.stopSignal }

    /// Stops accepting sends, waits for sends in progress to hand over their messages, flushes
    /// (bounded by ``KafkaProducerConfiguration/flushTimeout``; messages not acknowledged by then fail
    /// with a purge error) and destroys the client (bounded by
    /// ``KafkaProducerConfiguration/destroyTimeout``). Safe to call more than once, concurrently too.
    func shutdown() async {
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
        await pollThreadExit.wait()
        await client.destroy(deadline: configuration.destroyTimeout, name: "kafka-producer")
        let waiters = state.withLock { $0.finished() }
        for waiter in waiters { waiter.resume() }
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
        pollThreadExit.finish()
    }
}
