import AsyncHTTPClient
import CallContract
import CallTracing
import Crypto
import DequeModule
import Foundation
import Kafka
import Locking
import Logging
import NIOCore
import ServiceLifecycle
import Tracing

/// Posts statuses to their tenant's webhook (``WebhookTarget``, from the API keys file), reading
/// them from `voip.call-status` as a consumer group (`CALLPUSH_DISPATCH_WEBHOOK_GROUP`): each
/// dispatch instance delivers the statuses of the partitions it is assigned, and a partition's
/// position is committed only past statuses that were delivered (or given up on), so a restart
/// resumes where delivery stopped instead of losing what was queued.
///
/// Deliveries run in parallel across calls (`concurrency` lanes, a call always in the same lane)
/// and in order within a call; each is retried with backoff (200 ms doubling to 10 s) up to
/// `maxAttempts`, every attempt bounded by `timeout` (AsyncHTTPClient: connection pooling, HTTPS
/// with certificate verification). What waits for delivery is bounded in bytes: the consumer
/// stops reading at `queueBytes`.
///
/// Each POST carries the `CallStatus` JSON with `X-Callpush-Event-Id: <partition>-<offset>` (the
/// same for every attempt and every instance: receivers deduplicate on it),
/// `X-Callpush-Timestamp` (Unix seconds) and
/// `X-Callpush-Signature: sha256=<hex HMAC-SHA256 over "<timestamp>.<body>">`, and the status's
/// trace context as `traceparent` (the POST's own span when traced, else the status record's).
public final class WebhookSender: Service {
    private let targets: [String: WebhookTarget]
    private let delivery: WebhookDelivery
    private let kafka: KafkaConfiguration
    private let statusTopic: String
    private let view: StatusView
    private let metrics: DispatchMetrics?
    private let logger: Logger
    private let assigned = Locked(0)
    /// Partitions the group had no position for when first assigned, with the end offset then:
    /// records before it are history from before webhooks were set up, and are not posted.
    private let historyBefore = Locked<[Int32: Int64]>([:])
    private let tracing: CallTracing

    /// Partitions of the status topic this instance delivers now (assigned by the group).
    public var assignedPartitions: Int { assigned.withLock { $0 } }

    public init(targets: [String: WebhookTarget], delivery: WebhookDelivery, kafka: KafkaConfiguration, statusTopic: String,
                view: StatusView, metrics: DispatchMetrics?, tracing: CallTracing = .off, logger: Logger) {
        self.tracing = tracing
        self.targets = targets
        self.delivery = delivery
        self.kafka = kafka
        self.statusTopic = statusTopic
        self.view = view
        self.metrics = metrics
        self.logger = logger
    }

    public func run() async throws {
        var configuration = KafkaConsumerConfiguration(kafka: kafka, mode: .group(id: delivery.groupID, topics: [statusTopic]),
                                                       autoOffsetReset: "earliest", sessionTimeout: delivery.sessionTimeout,
                                                       heartbeatInterval: min(.seconds(3), delivery.sessionTimeout / 3),
                                                       maxBufferedMessages: 1_000)
        configuration.kafka.clientID = kafka.clientID + "-dispatch-webhooks"
        let assigned = self.assigned, historyBefore = self.historyBefore, logger = self.logger
        let consumerBox = Locked<KafkaConsumer?>(nil)
        let consumer = try KafkaConsumer(configuration: configuration, rebalanceHandler: KafkaRebalanceHandler(
            onAssign: { partitions in
                // A partition the group has no position for starts at its end now, and that
                // position is committed at once: a restart resumes there, not at "latest"
                // (resolved later, skipping what was written in between).
                if let consumer = consumerBox.withLock({ $0 }) {
                    do {
                        var start: [KafkaTopicPartition: Int64] = [:]
                        for (partition, offset) in try await consumer.committedOffsets(partitions) where offset == nil {
                            start[partition] = try await consumer.queryWatermarks(topic: partition.topic, partition: partition.partition).high
                        }
                        try await consumer.commit(start)
                        historyBefore.withLock { history in for (partition, offset) in start { history[partition.partition] = offset } }
                    } catch {
                        logger.warning("webhooks: cannot set the start position of new partitions", metadata: ["kafka.error": "\(error)"])
                    }
                }
                assigned.withLock { $0 += partitions.count }
            },
            onRevoke: { partitions in assigned.withLock { $0 -= partitions.count } }), logger: logger)
        consumerBox.withLock { $0 = consumer }
        let lanes = WebhookLanes(delivery: delivery, metrics: metrics, tracing: tracing, logger: logger)
        try? await cancelWhenGracefulShutdown { [self] in
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await lanes.run() }
                do {
                    for try await message in consumer.messages {
                        guard let job = self.job(for: message, consumer: consumer, lanes: lanes) else { continue }
                        guard await lanes.submit(job) else { break }
                    }
                } catch {
                    self.logger.warning("webhook consumer stopped", metadata: ["kafka.error": "\(error)"])
                }
                lanes.finish()
                group.cancelAll()
            }
        }
        await lanes.shutdown()
        await consumer.shutdown()
    }

    /// The delivery of one status record, or nil when its tenant has no webhook (its position is
    /// then recorded as done).
    private func job(for message: KafkaConsumerMessage, consumer: KafkaConsumer, lanes: WebhookLanes) -> WebhookLanes.Job? {
        let status = try? CallStatus.decode(Data(message.value))
        // Statuses of producers without tenants: the view knows the call's tenant, if anyone does.
        let tenant = status.flatMap { status in
            status.tenant ?? view.calls(callId: status.callId).first { $0.deliveries.contains { $0.deviceKey == status.deviceKey } }?.tenant
        }
        let target = tenant.flatMap { targets[$0] }
        let position = lanes.positions.begin(message)
        let isHistory = historyBefore.withLock { $0[message.partition] }.map { message.offset < $0 } ?? false
        guard let status, let target, !isHistory else {
            lanes.positions.finish(position, consumer: consumer)
            return nil
        }
        return WebhookLanes.Job(callId: status.callId, body: Data(message.value), eventID: "\(message.partition)-\(message.offset)",
                                target: target, position: position, consumer: consumer,
                                trace: TraceParent(kafkaHeaders: message.headers), tenant: tenant)
    }

    /// Hex HMAC-SHA256 over `"<timestamp>.<body>"`.
    public static func signature(secret: [UInt8], timestamp: String, body: Data) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Array(timestamp.utf8) + [UInt8(ascii: ".")] + Array(body),
                                                  using: SymmetricKey(data: secret))
        return Hex.encode(Array(mac))
    }
}

/// The delivery lanes: jobs of one call go to one lane and are posted in order; lanes run in
/// parallel. Submitting waits while the jobs not yet delivered hold `queueBytes`.
final class WebhookLanes: Sendable {
    struct Job: Sendable {
        var callId: String
        var body: Data
        var eventID: String
        var target: WebhookTarget
        var position: CommitPositions.Position
        var consumer: KafkaConsumer
        /// The status record's trace context.
        var trace: TraceParent?
        var tenant: String?
    }

    let positions = CommitPositions()
    private let delivery: WebhookDelivery
    private let metrics: DispatchMetrics?
    private let logger: Logger
    private let budget: ByteBudget
    private let queues: [(stream: AsyncStream<Job>, continuation: AsyncStream<Job>.Continuation)]
    private let client: HTTPClient
    private let tracing: CallTracing

    init(delivery: WebhookDelivery, metrics: DispatchMetrics?, tracing: CallTracing = .off, logger: Logger) {
        self.tracing = tracing
        self.delivery = delivery
        self.metrics = metrics
        self.logger = logger
        budget = ByteBudget(limit: delivery.queueBytes)
        queues = (0..<max(1, delivery.concurrency)).map { _ in AsyncStream<Job>.makeStream() }
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: TimeAmount(delivery.connectTimeout))
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool = .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: max(1, delivery.concurrency))
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Queues a job on its call's lane; false once the lanes are finishing.
    func submit(_ job: Job) async -> Bool {
        guard await budget.acquire(Self.cost(job)) else { return false }
        if case .terminated = queues[Self.lane(of: job.callId, lanes: queues.count)].continuation.yield(job) {
            budget.release(Self.cost(job))
            return false
        }
        return true
    }

    /// Delivers until ``finish()``.
    func run() async {
        await withTaskGroup(of: Void.self) { group in
            for queue in queues {
                group.addTask {
                    for await job in queue.stream {
                        await self.deliver(job)
                        self.positions.finish(job.position, consumer: job.consumer)
                        self.budget.release(Self.cost(job))
                    }
                }
            }
        }
    }

    /// Stops taking jobs; queued ones are dropped (their positions are not committed, so the
    /// next owner of the partition — or this instance after a restart — delivers them).
    func finish() {
        budget.close()
        for queue in queues { queue.continuation.finish() }
    }

    func shutdown() async {
        finish()
        try? await client.shutdown()
    }

    /// The lane of a call's deliveries (the same for every status of the call, within a process).
    static func lane(of callId: String, lanes: Int) -> Int {
        var hasher = Hasher()
        hasher.combine(callId)
        return Int(UInt(bitPattern: hasher.finalize()) % UInt(max(1, lanes)))
    }

    static func cost(_ job: Job) -> Int {
        512 + job.body.count + job.callId.utf8.count + job.eventID.utf8.count + (job.trace.map { 64 + ($0.tracestate?.utf8.count ?? 0) } ?? 0)
    }

    private func deliver(_ job: Job) async {
        var delay = Duration.milliseconds(200)
        for attempt in 1...max(1, delivery.maxAttempts) {
            if Task.isCancelled { return }
            let timestamp = String(Int(Date().timeIntervalSince1970))
            var request = HTTPClientRequest(url: job.target.url.absoluteString)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "X-Callpush-Event-Id", value: job.eventID)
            request.headers.add(name: "X-Callpush-Timestamp", value: timestamp)
            request.headers.add(name: "X-Callpush-Signature",
                                value: "sha256=" + WebhookSender.signature(secret: job.target.secret, timestamp: timestamp, body: job.body))
            request.body = .bytes(ByteBuffer(data: job.body))
            let span = tracing.startSpan(SpanName.webhook, continuing: job.trace, kind: .client)
            for (name, value) in traceHeaders(of: job, span: span, attempt: attempt) { request.headers.add(name: name, value: value) }
            do {
                let response = try await client.execute(request, timeout: TimeAmount(delivery.timeout))
                // Read (a bounded part of) the answer so the connection can be reused.
                _ = try? await response.body.collect(upTo: 64 * 1024)
                span?.attributes[SpanAttributeName.httpStatus] = Int(response.status.code)
                if (200..<300).contains(response.status.code) {
                    span?.end()
                    metrics?.webhook("delivered")
                    return
                }
                span?.fail("\(response.status.code)")
            } catch {
                span?.fail("no answer")
                if Task.isCancelled {
                    span?.end()
                    return
                }
            }
            span?.end()
            if attempt < delivery.maxAttempts {
                metrics?.webhook("retried")
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(10))
            }
        }
        metrics?.webhook("failed")
        logger.warning("webhook not delivered", metadata: ["call.id": "\(job.callId)", "webhook.event": "\(job.eventID)"])
    }
}

extension WebhookLanes {
    /// The W3C headers of one POST: those of its span (named after the call) when traced, else
    /// the status record's own, passed on unchanged.
    private func traceHeaders(of job: Job, span: (any Span)?, attempt: Int) -> [(String, String)] {
        guard let span else { return job.trace?.headerPairs ?? [] }
        span.attributes[SpanAttributeName.callID] = job.callId
        span.attributes[SpanAttributeName.tenant] = job.tenant
        span.attributes[SpanAttributeName.webhookAttempt] = attempt
        span.attributes[SpanAttributeName.httpMethod] = "POST"
        return tracing.traceParent(of: span.context)?.headerPairs ?? []
    }
}

/// The committable position of each partition: a record's offset is stored (and so committed)
/// only once it and every earlier record of its partition are done.
final class CommitPositions: Sendable {
    struct Position: Sendable, Hashable {
        var partition: Int32
        var offset: Int64
    }

    private struct Pending {
        var offsets: Deque<(offset: Int64, done: Bool, message: KafkaConsumerMessage)> = []
    }

    private let pending = Locked<[Int32: Pending]>([:])

    /// Records a record as started (records of a partition arrive in offset order).
    func begin(_ message: KafkaConsumerMessage) -> Position {
        pending.withLock { $0[message.partition, default: Pending()].offsets.append((message.offset, false, message)) }
        return Position(partition: message.partition, offset: message.offset)
    }

    /// Records a record as done and stores the offset past the last contiguous done record.
    func finish(_ position: Position, consumer: KafkaConsumer) {
        let committable = pending.withLock { pending -> KafkaConsumerMessage? in
            guard var partition = pending[position.partition] else { return nil }
            if let index = partition.offsets.firstIndex(where: { $0.offset == position.offset }) { partition.offsets[index].done = true }
            var last: KafkaConsumerMessage?
            while let first = partition.offsets.first, first.done {
                last = first.message
                partition.offsets.removeFirst()
            }
            pending[position.partition] = partition.offsets.isEmpty ? nil : partition
            return last
        }
        // A record of a partition revoked since is not stored; its next owner delivers it again.
        if let committable { try? consumer.storeOffset(for: committable) }
    }

    /// Records started and not yet committable.
    var count: Int { pending.withLock { $0.values.reduce(0) { $0 + $1.offsets.count } } }
}

/// Bytes that may be held at once; `acquire` waits until enough are released.
final class ByteBudget: Sendable {
    private struct State {
        var available: Int
        var waiter: (bytes: Int, continuation: CheckedContinuation<Bool, Never>)?
        var closed = false
    }

    private let limit: Int
    private let state: Locked<State>

    init(limit: Int) {
        self.limit = max(1, limit)
        state = Locked(State(available: max(1, limit)))
    }

    /// Takes `bytes` (at most the whole limit), waiting for them; false once closed. One waiter at a time.
    func acquire(_ bytes: Int) async -> Bool {
        let wanted = min(bytes, limit)
        return await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool? in
                if state.closed { return false }
                if state.available >= wanted {
                    state.available -= wanted
                    return true
                }
                state.waiter = (wanted, continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    func release(_ bytes: Int) {
        let resumed = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            state.available = min(limit, state.available + min(bytes, limit))
            guard let waiter = state.waiter, state.available >= waiter.bytes else { return nil }
            state.available -= waiter.bytes
            state.waiter = nil
            return waiter.continuation
        }
        resumed?.resume(returning: true)
    }

    func close() {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            state.closed = true
            defer { state.waiter = nil }
            return state.waiter?.continuation
        }
        waiter?.resume(returning: false)
    }

    /// Bytes held now.
    var held: Int { state.withLock { limit - $0.available } }
}
