import CallContract
import CallTracing
import CallpushCore
import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Synchronization

/// A push-worker: one member of the consumer group on `voip.call-requests`.
///
/// Pulls events a fetched batch at a time, runs each partition's deliveries in runs that share a
/// task (bounded by `maxInFlight` deliveries; when full, consumption pauses), stores offsets below
/// the lowest unfinished delivery, and on graceful
/// shutdown stops consuming, drains in-flight work (bounded), commits, leaves the group and
/// flushes its producer.
public final class PushWorkerService: Service, Sendable {
    public let configuration: PushWorkerConfiguration
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let coordinator: PartitionCoordinator
    let processor: DeliveryProcessor
    /// Where the consume loop (the first) and the partitions' runs run (see `init`).
    let executors: [any TaskExecutor]
    /// Deliveries pushing or writing at once (`maxInFlight`).
    let limiter: InFlightLimiter
    /// Events read and not finished: deliveries in flight plus those waiting for a slot, and
    /// cancels being recorded. The consume loop reads ahead up to this bound, so a cancel behind
    /// rings that wait for a slot still takes effect at once.
    let backlog: InFlightLimiter
    let logger: Logger
    /// This worker's metrics (served by `WorkerHTTPServer`).
    public let metrics: WorkerMetrics
    /// Whether the worker makes progress (`/readyz`, `/healthz`).
    public let health: WorkerHealth
    /// Traces each event's processing (off by default).
    let tracing: CallTracing
    private let pauses: AsyncStream<(Int32, Bool)>
    private let pauseRequests: AsyncStream<(Int32, Bool)>.Continuation

    /// - Parameters:
    ///   - sender: pushes each ring through its platform's service (``PlatformPushSender``).
    ///   - apps: apps with APNs credentials.
    ///   - androidApps: apps with FCM credentials.
    ///   - executors: where the worker's work runs — the consume loop (decoding) on the first, each
    ///     partition's runs (admission, payloads, pushes, answers, statuses) always on the same one. Give
    ///     it the push connections' event loops (``EventLoopTaskExecutor``, as `PushWorkerApp` does): a
    ///     run's pushes are then written, and their answers taken, on the thread that already runs it,
    ///     with no hop between threads (docs/benchmarks.md, "Where the worker runs"). Empty: Swift's
    ///     global executor.
    public init(configuration: PushWorkerConfiguration, sender: any VoIPPushSending, apps: Set<String>,
                androidApps: Set<String> = [], ackTokens: AckTokenSigner, logger: Logger, metrics: WorkerMetrics = WorkerMetrics(),
                history: (any StatusHistoryRebuilding)? = nil, tracing: CallTracing = .off, executors: [any TaskExecutor] = []) throws {
        self.configuration = configuration
        self.executors = executors
        self.tracing = tracing
        self.logger = logger
        self.metrics = metrics
        let health = WorkerHealth(bounds: configuration.health)
        self.health = health
        let producer = try KafkaProducer(configuration: configuration.producer, logger: logger)
        self.producer = producer
        let dedupe = PartitionDedupe(retention: configuration.dedupeWindow, capacity: configuration.dedupeCapacity)
        let cancels = CancelSignals(capacity: configuration.cancelCapacity)
        let requestsTopic = configuration.requestsTopic
        // The consumer's rebalance callbacks call the coordinator, so the coordinator is built first;
        // it stores offsets through `offsets`, which gets the consumer as soon as that exists.
        let offsets = ConsumerOffsetStore(topic: requestsTopic)
        // Pauses and resumes are applied in the order asked, by one task (`applyPauses`).
        let (pauses, pauseRequests) = AsyncStream.makeStream(of: (Int32, Bool).self)
        (self.pauses, self.pauseRequests) = (pauses, pauseRequests)
        let coordinator = PartitionCoordinator(
            dedupe: dedupe,
            history: history ?? StatusHistoryReader(kafka: configuration.kafka, statusTopic: configuration.statusTopic,
                                                    window: configuration.dedupeWindow, timeout: configuration.rebuildTimeout, logger: logger),
            drainTimeout: configuration.drainTimeout,
            storeOffset: { partition, offset in try offsets.store(partition: partition, offset: offset) },
            pause: { partition, paused in pauseRequests.yield((partition, paused)) },
            leftoverBound: configuration.leftoverBound,
            cancels: cancels, cancelMemory: configuration.dedupeWindow,
            pauseAfter: configuration.pauseAfterUnstored, health: health, metrics: metrics, executors: executors, logger: logger)
        self.coordinator = coordinator
        var settings = DeliveryProcessor.Settings(workerID: configuration.workerID, apps: apps, androidApps: androidApps,
                                                  retry: configuration.retry,
                                                  attemptTimeout: configuration.attemptTimeout, cancelMemory: configuration.dedupeWindow)
        settings.outcomeWriteBound = configuration.outcomeWriteBound
        self.processor = DeliveryProcessor(
            settings: settings,
            sender: sender,
            publisher: KafkaOutcomePublisher(producer: producer, statusTopic: configuration.statusTopic,
                                             deadLetterTopic: configuration.deadLetterTopic),
            cancels: cancels, dedupe: dedupe, ackTokens: ackTokens,
            credentials: CredentialCircuit(initialCoolDown: configuration.credentialCoolDown),
            logger: logger, metrics: metrics, health: health)
        self.limiter = InFlightLimiter(limit: configuration.maxInFlight)
        self.backlog = InFlightLimiter(limit: configuration.maxInFlight + max(100, configuration.maxInFlight))
        let consumer = try KafkaConsumer(
            configuration: configuration.consumer,
            rebalanceHandler: KafkaRebalanceHandler(
                onAssign: { partitions in await coordinator.assigned(partitions.filter { $0.topic == requestsTopic }.map(\.partition)) },
                onRevoke: { partitions in await coordinator.revoked(partitions.filter { $0.topic == requestsTopic }.map(\.partition)) }),
            logger: logger)
        self.consumer = consumer
        offsets.bind(consumer)
    }

    /// Partitions this worker owns now.
    public var ownedPartitions: [Int32] { coordinator.owned }

    /// The worker's state in a few lines, for a test's failure message or a debugging session:
    /// in-flight and backlog slots (used / waiting requests), the coordinator's partitions and the
    /// Kafka consumer's assignment and buffer.
    package var stateSummary: String {
        "slots: inFlight=\(limiter.inUse)/\(limiter.limit) waiting=\(limiter.waiting), backlog=\(backlog.inUse)/\(backlog.limit) waiting=\(backlog.waiting)\n"
            + "coordinator: \(coordinator.stateSummary)\nconsumer: \(consumer.stateSummary)"
    }

    public func run() async throws {
        logger.info("push-worker starting", metadata: ["worker.id": "\(configuration.workerID)", "kafka.group": "\(configuration.groupID)",
                                                       "kafka.group_instance_id": "\(configuration.groupInstanceID ?? "-")"])
        do {
            try await TopicLayoutCheck.run(kafka: configuration.kafka, requestsTopic: configuration.requestsTopic,
                                           statusTopic: configuration.statusTopic, logger: logger)
        } catch {
            logger.critical("push-worker cannot start", metadata: ["error": "\(error)"])
            await consumer.shutdown()
            await producer.shutdown()
            throw error
        }
        var failure: (any Error)?
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.maintain() }
            group.addTask { await self.applyPauses() }
            do {
                try await cancelWhenGracefulShutdown {
                    try await withTaskExecutorPreference(self.executors.first) { try await self.consume() }
                }
            } catch is CancellationError {
                // Graceful shutdown (or cancellation) ended consumption.
            } catch {
                failure = error
                logger.error("consumer failed", metadata: ["error": "\(error)"])
            }
            group.cancelAll()
        }
        if Task.isCancelled {
            // Cancelled rather than shut down gracefully: hand back in-flight work without waiting.
            coordinator.abandonAll()
            logger.warning("push-worker cancelled; in-flight deliveries handed back")
        } else {
            let drained = await coordinator.drainAll()
            logger.info("push-worker draining done", metadata: ["drained": "\(drained)"])
        }
        await consumer.shutdown()
        await producer.shutdown()
        logger.info("push-worker stopped")
        if let failure { throw failure }
    }

    /// The most deliveries of one partition begun as one run (one task; their first pushes sent
    /// together, their statuses written together). A run's statuses wait for its slowest push, so
    /// runs stay short enough to pipeline: several are in flight at once within `maxInFlight`.
    static let runLimit = 256

    /// Takes the consumer's messages a held batch at a time, and begins each partition's consecutive
    /// messages in it (in offset order) as runs of at most `runLimit` deliveries.
    private func consume() async throws {
        var messages = consumer.messages.makeAsyncIterator()
        let runLimit = max(1, min(Self.runLimit, configuration.maxInFlight))
        while let batch = try await messages.nextBatch() {
            for messages in Self.byPartition(batch) {
                var from = messages.startIndex
                while from < messages.endIndex {
                    let to = min(from + runLimit, messages.endIndex)
                    guard await begin(run: messages[from..<to]) else { return }
                    from = to
                }
            }
        }
    }

    /// A batch cut where the partition changes: each piece one partition's consecutive messages, in offset
    /// order, a slice of the batch (not a copy). A partition met again later in the batch gets a later piece,
    /// begun after the earlier one as the pieces of a long run are.
    static func byPartition(_ batch: [KafkaConsumerMessage]) -> [ArraySlice<KafkaConsumerMessage>] {
        var slices: [ArraySlice<KafkaConsumerMessage>] = []
        var start = batch.startIndex
        for index in batch.indices where index == batch.endIndex - 1 || batch[index + 1].partition != batch[index].partition {
            slices.append(batch[start...index])
            start = index + 1
        }
        return slices
    }

    /// Begins a run of one partition's messages (consecutive, in offset order). False when the
    /// consume loop was cancelled.
    ///
    /// The run's deliveries share one task: it takes their in-flight slots at once (`maxInFlight`
    /// counts deliveries, not runs), then processes them together (`DeliveryProcessor.process(run:)`);
    /// each delivery's offset is stored, and its slots returned, as soon as its own outcome is durable.
    private func begin(run messages: ArraySlice<KafkaConsumerMessage>) async -> Bool {
        guard await backlog.acquire(count: messages.count) else { return false }
        let (events, work) = prepare(run: messages)
        await place(events, messages, work)
        return true
    }

    /// The run's events, their intake done, and the work of its task.
    private func prepare(run messages: ArraySlice<KafkaConsumerMessage>) -> ([InboundEvent], @Sendable (DeliveryRun) async -> Void) {
        let events = messages.map { InboundEvent($0, tracing: tracing) }
        // Cancels take effect here, in partition order, before any of these events or later ones
        // waits for anything; a cancel needs no in-flight slot (its marker is written by its run).
        let processor = self.processor
        let intakes = events.map { processor.intake($0) }
        let (limiter, backlog, coordinator) = (limiter, backlog, coordinator)
        let work: @Sendable (DeliveryRun) async -> Void = { run in
            let items = run.indices.map { (intake: intakes[$0], event: events[$0]) }
            let needsSlot = items.map { item in if case .cancel = item.intake { false } else { true } }
            let slots = needsSlot.reduce(0) { $0 + ($1 ? 1 : 0) }
            var granted = true
            if slots > 0 { granted = await limiter.acquire(count: slots) }
            if granted, !coordinator.beginWork(run) {
                limiter.release(count: slots)
                granted = false
            }
            guard granted else {
                run.finish(items.indices.map { ($0, DeliveryResult.handedBack) })
                backlog.release(count: items.count)
                return
            }
            let finish: @Sendable ([(Int, DeliveryResult)]) -> Void = { ended in
                let counted = run.finish(ended)
                guard !counted.isEmpty else { return }
                backlog.release(count: counted.count)
                limiter.release(count: counted.reduce(0) { $0 + (needsSlot[$1] ? 1 : 0) })  // cancels took none
            }
            await processor.process(run: items, finished: finish)
            finish(items.indices.map { ($0, DeliveryResult.handedBack) })
        }
        return (events, work)
    }

    /// Starts a run's work at the coordinator, waiting for its partition's assignment if needed.
    private func place(_ events: [InboundEvent], _ messages: ArraySlice<KafkaConsumerMessage>,
                       _ work: @escaping @Sendable (DeliveryRun) async -> Void) async {
        while true {
            switch coordinator.start(run: events, isCurrent: { consumer.isCurrent(messages[messages.startIndex + $0]) }, work) {
            case .started(let begun):
                backlog.release(count: events.count - begun.count)
            case .stale:
                backlog.release(count: events.count)
            case .waitForAssignment:
                if let partition = events.first?.partition { await coordinator.assignmentSettled(partition) }
                continue
            }
            return
        }
    }

    /// Pauses or resumes partitions as the coordinator asks (in order).
    private func applyPauses() async {
        let topic = configuration.requestsTopic
        for await (partition, paused) in pauses {
            let partitions = [KafkaTopicPartition(topic: topic, partition: partition)]
            do {
                if paused { try await consumer.pause(partitions) } else { try await consumer.resume(partitions) }
            } catch {
                logger.warning("could not pause or resume a partition", metadata: ["kafka.partition": "\(partition)", "error": "\(error)"])
            }
        }
    }

    /// Consumer lag per owned partition: high watermark minus the first unfinished offset. The high
    /// watermark is the one the consumer learned from its last fetch response (no broker request),
    /// except while the partition's fetching is paused (back-pressure, a held-back partition):
    /// querying the broker for each partition every 5 s held up the fetches on the same connections
    /// (p99 of the deliveries in the next ~200 ms up 2–3×). It is asked from the broker only while
    /// the consumer has not learned it yet.
    ///
    /// A partition with no message begun since its assignment (idle, or stuck before its first
    /// delivery) starts at the group's committed offset — one request for all such partitions — or,
    /// with nothing committed, at the partition's first offset (`auto.offset.reset=earliest`), so
    /// every owned partition has a value and a partition moved to another worker has none here.
    private func updateLag() async {
        let topic = configuration.requestsTopic
        let positions = coordinator.positions
        var starts = positions.compactMapValues { $0 }
        let unbegun = positions.keys.filter { starts[$0] == nil }.sorted()
        if !unbegun.isEmpty,
           let committed = try? await consumer.committedOffsets(unbegun.map { KafkaTopicPartition(topic: topic, partition: $0) },
                                                                timeout: .seconds(2)) {
            for partition in unbegun {
                if let offset = committed[KafkaTopicPartition(topic: topic, partition: partition)] ?? nil {
                    starts[partition] = offset
                } else if let low = consumer.cachedWatermarks(topic: topic, partition: partition)?.low {
                    starts[partition] = low
                }
            }
        }
        var lags: [Int32: Int64] = [:]
        for (partition, start) in starts {
            // While fetching is paused the consumer learns no new high watermark: ask the broker, or
            // the gauge would freeze at what it was when the worker fell behind.
            var high = consumer.isFetchPaused(topic: topic, partition: partition)
                ? nil : consumer.cachedHighWatermark(topic: topic, partition: partition)
            if high == nil {
                high = try? await consumer.queryWatermarks(topic: topic, partition: partition, timeout: .seconds(2)).high
            }
            if let high { lags[partition] = max(0, high - start) }
        }
        metrics.setLags(lags, owned: Set(positions.keys))
    }

    /// Whether the worker makes progress (`WorkerHealth`): ready owns partitions, writes its
    /// outcomes, finishes its deliveries and has complete dedupe state; live is not stuck for long.
    public var healthReport: WorkerHealth.Report {
        health.report(owned: coordinator.owned.count, oldestUnfinished: coordinator.oldestUnfinished())
    }

    /// Whether the worker should receive work (`/readyz`).
    public var isReady: Bool { healthReport.ready }

    /// Updates gauges every 5 s; forgets dedupe and cancel entries past their window every 30 s.
    private func maintain() async {
        var ticks = 0
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(5))
            ticks += 1
            metrics.setInFlight(coordinator.inFlightCount)
            metrics.setAssigned(coordinator.owned.count)
            let suspended = processor.credentials.suspended(now: Date())
            for app in processor.settings.iosApps.sorted() {
                for environment in APNSEnvironment.allCases {
                    metrics.setSuspended(app: app, platform: .ios, environment: environment.rawValue,
                                         suspended.contains(CredentialScope(app: app, environment: environment)))
                }
            }
            for app in processor.settings.androidApps.sorted() {
                metrics.setSuspended(app: app, platform: .android, environment: "fcm", suspended.contains(.fcm(app: app)))
            }
            metrics.setOldestUnfinished(coordinator.oldestUnfinished(), owned: Set(coordinator.owned))
            metrics.setMemory(dedupeEvictions: processor.dedupe.evictions, cancelsRemembered: processor.cancels.count,
                              cancelEvictions: processor.cancels.evicted)
            metrics.setWritesFailing(health.writesFailingFor())
            await updateLag()
            if ticks % 6 == 0 {
                let now = Date()
                processor.dedupe.expire(now: now)
                processor.cancels.expire(now: now)
            }
        }
    }
}

/// The consumer's offset store, as the partition coordinator uses it. The coordinator is built before
/// the consumer (whose rebalance callbacks call it, from the poll thread the consumer's initializer
/// starts), so the consumer is bound here right after it is built. Offsets are stored only for
/// deliveries of messages `run()` reads, which is later.
private final class ConsumerOffsetStore: Sendable {
    /// An offset store before the consumer existed: not stored (the message is delivered again).
    struct NotBound: Error, CustomStringConvertible {
        var description: String { "the consumer's offset store was used before the consumer existed" }
    }

    private let topic: String
    private let consumer = AtomicLazyReference<KafkaConsumer>()

    init(topic: String) {
        self.topic = topic
    }

    func bind(_ consumer: KafkaConsumer) {
        _ = self.consumer.storeIfNil(consumer)
    }

    func store(partition: Int32, offset: Int64) throws {
        guard let consumer = consumer.load() else { throw NotBound() }
        try consumer.store(topic: topic, partition: partition, offset: offset)
    }
}
