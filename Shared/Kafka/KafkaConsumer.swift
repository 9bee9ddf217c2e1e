import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Locking

/// A Kafka consumer delivering messages as an `AsyncSequence` (``messages``), at least once.
///
/// - Group mode: subscribes to topics as a consumer-group member (eager `range` assignor by
///   default, optional static membership). A ``KafkaRebalanceHandler`` learns of assignments
///   and, on revoke, can finish in-flight work before the layer commits and unassigns.
/// - Manual mode: ``assign(_:)`` explicit partitions at explicit offsets; with
///   ``offsetsForTimes(topic:partition:timestampMilliseconds:timeout:)`` and
///   ``queryWatermarks(topic:partition:timeout:)`` to read a range.
/// - Offsets: store `offset + 1` after processing with ``storeOffset(for:)``; stored offsets
///   are committed automatically, on revoke and on close.
/// - Bounded memory: at most ``KafkaConsumerConfiguration/maxBufferedMessages`` are buffered;
///   beyond that fetching pauses while rebalances are still served.
///
/// A dedicated thread (started by the initializer) polls librdkafka; run the consumer as a
/// `Service` (its `run()` closes the consumer — leaving the group — on graceful shutdown) or
/// call ``shutdown()``.
public final class KafkaConsumer: Service, Sendable {
    /// The configuration the consumer was created with.
    public let configuration: KafkaConsumerConfiguration
    let logger: Logger
    let client: RDKafkaClient
    let rebalanceHandler: KafkaRebalanceHandler
    let state = Locked(ConsumerStateMachine())
    /// Mirrors `state.epoch` for a lock-free check by iterators.
    let epochMirror = Atomic<Int>(0)
    let commands = Locked(ConsumerCommandQueue())
    let handleGuard = HandleGuard()
    let waiterIDs = Atomic<Int>(0)
    let pollContext = ConsumerPollContext()
    /// The last rebalance handler task: the next one waits for it (handlers run one at a time).
    let handlerChain = Locked<Task<Void, Never>?>(nil)
    /// Set when an assign handler returned after the poll thread stopped waiting for it: the
    /// poll thread then resumes that handler's partitions.
    let pauseSyncRequested = Atomic<Bool>(false)
    private let consumerQueue: RDKafkaQueue?
    private let stopRequested = Atomic<Bool>(false)
    private let shutdownStarted = Atomic<Bool>(false)
    private let pollThreadExit = OneShotSignal()
    private let shutdownDone = OneShotSignal()
    /// Messages per batch handed to the application: 1024 × ~72 B stays below glibc's mmap
    /// threshold (128 KB), so batch arrays come from the heap instead of fresh zeroed pages.
    static let batchLimit = 1024
    /// An empty queue after this many messages wakes the broker threads (see `wakeFetchersIfThrottled`).
    static let wakeAfterMessages = 4096

    /// Creates the consumer, subscribes (group mode) and starts its poll thread.
    ///
    /// - Throws: ``KafkaError`` with code ``KafkaError/Code/configuration`` naming a rejected property.
    public init(
        configuration: KafkaConsumerConfiguration,
        rebalanceHandler: KafkaRebalanceHandler = KafkaRebalanceHandler(),
        logger: Logger
    ) throws(KafkaError) {
        self.configuration = configuration
        self.rebalanceHandler = rebalanceHandler
        self.logger = logger
        let client = try RDKafkaClient.consumer(properties: configuration.librdkafkaProperties, logger: logger)
        self.client = client
        let consumerQueue = client.takeConsumerQueue()
        self.consumerQueue = consumerQueue
        if case .group(_, let topics) = configuration.mode {
            do {
                try client.subscribe(topics: topics)
            } catch {
                consumerQueue?.destroy()
                client.destroyInBackground()
                throw error
            }
        }
        client.context.delegate = self
        let thread = Thread { [self] in
            nameCurrentThreadForTheKernel("kafka-consumer")
            self.pollLoop()
        }
        thread.name = "kafka-consumer-poll"
        thread.start()
        logger.debug("kafka consumer created", metadata: ["kafka.config": "\(configuration)"])
    }

    /// The messages, in partition order. Ends after ``shutdown()``; throws a fatal ``KafkaError``.
    public var messages: KafkaConsumerMessages { KafkaConsumerMessages(consumer: self) }

    /// The fatal error raised on this consumer, if any (e.g. fenced static member).
    public var fatalError: KafkaError? { client.context.fatalError }

    /// Runs until graceful shutdown, cancellation or a fatal error, then closes the consumer.
    ///
    /// - Throws: the fatal ``KafkaError`` if one ended it.
    public func run() async throws {
        await client.context.stopSignal.waitUntilStopped()
        await shutdown()
        if let fatal = client.context.fatalError { throw fatal }
    }

    /// Closes the consumer: ends ``messages``, revokes (running the revoke handler), commits
    /// stored offsets, leaves the group, then destroys the client. Each step is bounded by
    /// ``KafkaConsumerConfiguration/closeTimeout``. Safe to call more than once.
    public func shutdown() async {
        client.context.stopSignal.finish()
        guard !shutdownStarted.exchange(true, ordering: .acquiringAndReleasing) else {
            await shutdownDone.wait()
            return
        }
        stopRequested.store(true, ordering: .releasing)
        wakePollThread()
        if await pollThreadExit.wait(timeout: configuration.closeTimeout) {
            await handleGuard.closeAndWait()
            consumerQueue?.destroy()
            await client.destroy(deadline: configuration.closeTimeout, name: "kafka-consumer")
        } else {
            // The poll thread is still inside `closeConsumer()`: the handle cannot be destroyed.
            logger.error("kafka consumer close did not finish in time; abandoning the client")
        }
        shutdownDone.finish()
        logger.debug("kafka consumer shut down")
    }

    func wakePollThread() {
        consumerQueue?.yield()
    }

    /// The poll thread: collects messages with `pollConsumer` (librdkafka's consumer poll, which also serves
    /// rebalances, logs and errors), hands batches to the buffer, applies commands and
    /// back-pressure; at the end closes the consumer on this same thread.
    private func pollLoop() {
        // Batches of at most a quarter of the buffer bound: the buffer stays below 1.5× its bound
        // (one batch collected as it fills, one handed back by an iterator that stopped early).
        let batchLimit = min(Self.batchLimit, max(1, configuration.maxBufferedMessages / 4))
        let batchByteLimit = max(1, configuration.maxBufferedBytes / 4)  // the same for the byte bound
        pollContext.batchCapacity = batchLimit
        pollContext.pending.reserveCapacity(batchLimit)
        pollContext.pendingEpoch = state.withLock { $0.epoch }
        let fetchThreshold = client.configValue("queued.min.messages").flatMap(Int.init) ?? 100_000
        while !stopRequested.load(ordering: .acquiring) {
            if pauseSyncRequested.exchange(false, ordering: .acquiringAndReleasing) { syncPauses() }
            runCommands()
            var timeout: Int32 = 100
            var drained = false
            var pendingBytes = 0
            while pollContext.pending.count < batchLimit, pendingBytes < batchByteLimit {
                guard let message = client.pollConsumer(timeoutMilliseconds: timeout) else {
                    drained = timeout == 0
                    break
                }
                timeout = 0
                if let error = message.consumeError {
                    handleConsumeError(error)
                } else {
                    let made = pollContext.makeMessage(message.pointer)
                    pendingBytes += made.bufferedBytes
                    pollContext.pending.append(made)
                }
                message.destroy()
            }
            pollContext.polledSinceWake += pollContext.pending.count
            flushPending()
            adjustBackpressure()
            wakeFetchersIfThrottled(threshold: fetchThreshold, drained: drained)
        }
        pollContext.pending = []
        let waiters = state.withLock { state in
            defer { epochMirror.store(state.epoch, ordering: .releasing) }
            return state.finish(error: nil)
        }
        for waiter in waiters { waiter.resume(returning: nil) }
        if !client.context.fatalErrorIsSet {
            if let error = client.closeConsumer() {
                logger.warning("kafka consumer close failed", metadata: ["kafka.error": "\(error)"])
            }
        }
        failCommands()
        pollThreadExit.finish()
    }

    /// Wakes the broker threads once the queue they stopped filling has room again.
    ///
    /// librdkafka stops fetching while the consumer queue holds `queued.min.messages` (it counts
    /// the queue all partitions forward to, so the bound is per consumer) or
    /// `queued.max.messages.kbytes`, and 2.0.2 looks again only when a broker thread wakes: up to
    /// 1 s later. Measured on the embedded cluster: every full queue stalled the consumer ~0.8 s
    /// (docs/kafka.md, "Fetch wake-up"). So: wake them when the queue drops below the count bound
    /// after being at it, and when it is found empty after a large intake (the byte bound, which
    /// the public API does not expose).
    private func wakeFetchersIfThrottled(threshold: Int, drained: Bool) {
        guard let queue = consumerQueue else { return }
        let queued = queue.length
        if queued >= threshold {
            pollContext.fetchQueueWasFull = true
            return
        }
        if pollContext.fetchQueueWasFull || (drained && pollContext.polledSinceWake >= Self.wakeAfterMessages) {
            pollContext.fetchQueueWasFull = false
            pollContext.polledSinceWake = 0
            client.wakeBrokerThreads()
        }
    }

    /// Hands the collected messages to the buffer (or a waiting iterator).
    func flushPending() {
        let epochNow: Int
        if !pollContext.pending.isEmpty {
            let batch = MessageBatch(epoch: pollContext.pendingEpoch, messages: pollContext.pending)
            // The next batch is likely the size of this one: full batches under load (no regrowth),
            // a few messages when trickling (not a fresh ~100 KB block per message, whose malloc
            // and free cost more than the message).
            let reserve = min(pollContext.batchCapacity, max(16, batch.messages.count * 2))
            pollContext.pending = []
            pollContext.pending.reserveCapacity(reserve)
            let (action, epoch, pauseNew) = state.withLock { state in
                (state.append(batch, limits: configuration.bufferLimits), state.epoch, state.takePauseSyncNeeded())
            }
            epochNow = epoch
            // A partition that began delivering while fetching is paused for back-pressure.
            if pauseNew { syncPauses() }
            switch action {
            case .resume(let waiter, let batch): waiter.resume(returning: batch)
            case .buffered(let overLimit): if overLimit { pauseForBackpressure() }
            case .dropped: break
            }
        } else {
            epochNow = state.withLock { $0.epoch }
        }
        pollContext.pendingEpoch = epochNow
    }

    private func handleConsumeError(_ error: RDKafkaConsumeError) {
        if error.isPartitionEOF { return }
        if error.isFatal || client.fatalError != nil {
            let fatal = client.fatalError ?? error.fatalError
            logger.critical("kafka consumer fatal error", metadata: ["kafka.error": "\(fatal)"])
            let waiters = state.withLock { state in
                defer { epochMirror.store(state.epoch, ordering: .releasing) }
                return state.finish(error: fatal)
            }
            for (index, waiter) in waiters.enumerated() {
                if index == 0 { waiter.resume(throwing: fatal) } else { waiter.resume(returning: nil) }
            }
            client.context.stopSignal.finish()
            return
        }
        logger.warning(
            "kafka consume error",
            metadata: ["kafka.error.code": "\(error.name)", "kafka.error.reason": "\(error.reason)"]
        )
    }
}

extension RDKafkaClientContext {
    var fatalErrorIsSet: Bool { fatalError != nil }
}

extension KafkaConsumer {
    /// How many times the consumer paused fetching because its buffer was full (observability).
    public var backpressurePauseCount: Int { state.withLock { $0.backpressurePauses } }
    /// Bytes buffered between librdkafka and the application now (``KafkaConsumerConfiguration/maxBufferedBytes``).
    var bufferedByteCount: Int { state.withLock { $0.bufferedBytes } }
}

extension KafkaConsumer {
    /// The consumer's assignment and buffer state in one line, for a test's failure message or a
    /// debugging session: assigned partitions (with the epoch each became valid), those held for
    /// their assign handler, paused in librdkafka, paused by the application, delivering since their
    /// assignment; back-pressure, buffered messages and waiting iterators.
    package var stateSummary: String {
        state.withLock { $0.summary }
    }
}

extension ConsumerStateMachine {
    var summary: String {
        func names(_ partitions: some Sequence<KafkaTopicPartition>) -> String {
            partitions.map(\.partition).sorted().map(String.init).joined(separator: ",")
        }
        let assignedText = assigned.sorted { $0.key.partition < $1.key.partition }.map { "\($0.key.partition)@\($0.value)" }
        return "epoch=\(epoch) assigned=[\(assignedText.joined(separator: ","))] awaitingHandler=[\(names(awaitingAssignHandler.keys))] "
            + "fetchPaused=[\(names(fetchPaused))] userPaused=[\(names(userPaused))] delivering=[\(names(delivering))] "
            + "backpressure=\(backpressurePaused) buffered=\(bufferedCount) (\(bufferedBytes) bytes) waiters=\(waiterCount) running=\(isRunning)"
    }
}
