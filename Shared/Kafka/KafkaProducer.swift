import Foundation
import Logging
import ServiceLifecycle
import Locking

/// An idempotent Kafka producer whose `send` returns only after the broker acknowledged.
///
/// - ``send(_:)-(KafkaProducerRecord)`` / ``send(_:)-([KafkaProducerRecord])`` return delivery
///   reports (topic, partition, offset) or typed ``KafkaError``s. ``KafkaError/disposition`` says
///   what to do about one (retry, give the record up, fix permissions);
///   ``KafkaError/persistenceStatus`` tells "not stored" from "possibly stored".
/// - ``send(_:timeout:)-(KafkaProducerRecord,_)``: the same, bounded by the caller.
/// - Back-pressure: when librdkafka's local queue is full the sender waits (bounded by
///   ``KafkaProducerConfiguration/queueFullTimeout``) instead of failing or buffering in Swift.
/// - Fatal errors (e.g. idempotence sequence desync, a missing cluster permission for the
///   idempotent producer) are repaired here: the producer replaces its librdkafka client by itself
///   (the broken one is flushed and destroyed in the background, bounded), backing off when the
///   new one fails again at once. Records caught in it fail with disposition
///   ``KafkaError/Disposition/fatal``: send them again. ``clientReplacements`` counts replacements.
///
/// Delivery reports are served by a dedicated thread per client that blocks in librdkafka's poll
/// (started by the initializer). Run the producer as a `Service` (its `run()` ends with a
/// flush bounded by ``KafkaProducerConfiguration/flushTimeout``, then destroy) or call
/// ``shutdown()``.
public final class KafkaProducer: Service, Sendable {
    /// The configuration the producer was created with.
    public let configuration: KafkaProducerConfiguration
    let logger: Logger
    /// Where bounded sends register their deadlines (``DeadlineSweeper/shared`` unless a test gives
    /// the producer its own, to count only its deadlines).
    let deadlines: DeadlineSweeper
    private let clients: Locked<ProducerReplacement>
    private let stopped = OneShotSignal()

    /// Creates the producer and starts its delivery-report thread.
    ///
    /// - Throws: ``KafkaError`` with code ``KafkaError/Code/configuration`` naming a rejected property.
    public convenience init(configuration: KafkaProducerConfiguration, logger: Logger) throws(KafkaError) {
        try self.init(configuration: configuration, logger: logger, deadlines: .shared)
    }

    init(configuration: KafkaProducerConfiguration, logger: Logger, deadlines: DeadlineSweeper) throws(KafkaError) {
        self.configuration = configuration
        self.logger = logger
        self.deadlines = deadlines
        let first = try ProducerClient(configuration: configuration, logger: logger, deadlines: deadlines)
        self.clients = Locked(ProducerReplacement(
            first, backoff: configuration.replacementBackoff, maxBackoff: configuration.maxReplacementBackoff
        ))
        watch(first)
        logger.debug("kafka producer created", metadata: ["kafka.config": "\(configuration)"])
    }

    /// The fatal error of the client in use, if any (it is being replaced).
    public var fatalError: KafkaError? { currentClient.fatalError }

    /// How many times the producer replaced its librdkafka client after a fatal error.
    public var clientReplacements: Int { clients.withLock { $0.replacements } }

    /// The client sends go through now.
    var currentClient: ProducerClient { clients.withLock { $0.current } }

    /// Runs until graceful shutdown or cancellation, then flushes (bounded) and destroys the
    /// client. Fatal errors do not end it: the producer replaces its client.
    public func run() async throws {
        await stopped.waitUntilStopped()
        await shutdown()
    }

    /// Stops accepting sends, waits for sends in progress to hand over their messages,
    /// flushes with ``KafkaProducerConfiguration/flushTimeout`` (messages not acknowledged by
    /// then fail with a purge error), and destroys the client. Safe to call more than once.
    public func shutdown() async {
        stopped.finish()
        let (all, pending) = clients.withLock { $0.stop() }
        pending?.cancel()
        await pending?.value
        for client in all { await client.shutdown() }
        logger.debug("kafka producer shut down")
    }

    // MARK: sending

    /// Sends one record and returns once the broker acknowledged it.
    ///
    /// Waits (bounded by ``KafkaProducerConfiguration/queueFullTimeout``) while the local
    /// queue is full. The wait for the acknowledgement is bounded by
    /// ``KafkaProducerConfiguration/deliveryTimeout``.
    ///
    /// - Throws: ``KafkaError`` — the delivery failed (see ``KafkaError/disposition`` and
    ///   ``KafkaError/persistenceStatus``), or the producer is shut down.
    @discardableResult
    public func send(_ record: KafkaProducerRecord) async throws(KafkaError) -> KafkaDeliveryReport {
        try await send([record], deadline: nil)[0].get()
    }

    /// Sends many records and returns one result per record, in order, once every record
    /// was acknowledged or failed. This is the fast path: one continuation per batch.
    ///
    /// - Throws: ``KafkaError`` only when nothing could be sent (shut down, or the client is
    ///   fatal and not replaced yet: disposition ``KafkaError/Disposition/fatal``).
    public func send(_ records: [KafkaProducerRecord]) async throws(KafkaError) -> [Result<KafkaDeliveryReport, KafkaError>] {
        try await send(records, deadline: nil)
    }

    /// Sends one record like ``send(_:)-(KafkaProducerRecord)``, but returns by `timeout` at the
    /// latest: then it throws ``KafkaError/Code/timeout`` (disposition
    /// ``KafkaError/Disposition/retriable``) with ``KafkaError/persistenceStatus``
    /// `possiblyPersisted` if the record was handed to librdkafka (which keeps it and may still
    /// deliver it; an idempotent producer stores it at most once), `notPersisted` if the local
    /// queue stayed full. The bound costs no task: it is an entry in the shared ``DeadlineSweeper``
    /// (fires up to its resolution, 50 ms, late).
    @discardableResult
    public func send(_ record: KafkaProducerRecord, timeout: Duration) async throws(KafkaError) -> KafkaDeliveryReport {
        try await send([record], deadline: .now + timeout)[0].get()
    }

    /// Sends many records like ``send(_:)-([KafkaProducerRecord])``, returning by `timeout` at the
    /// latest; records unanswered then fail with ``KafkaError/Code/timeout`` (see
    /// ``send(_:timeout:)-(KafkaProducerRecord,_)``).
    public func send(
        _ records: [KafkaProducerRecord], timeout: Duration
    ) async throws(KafkaError) -> [Result<KafkaDeliveryReport, KafkaError>] {
        try await send(records, deadline: .now + timeout)
    }

    /// Waits until every message handed to librdkafka so far was acknowledged or failed, at
    /// most `timeout`. Returns `true` if the queue is empty. (Shutdown flushes by itself.)
    public func flush(timeout: Duration) async -> Bool {
        await currentClient.flush(timeout: timeout)
    }

    private func send(
        _ records: [KafkaProducerRecord], deadline: ContinuousClock.Instant?
    ) async throws(KafkaError) -> [Result<KafkaDeliveryReport, KafkaError>] {
        var client = currentClient
        while true {
            do {
                let results = try await client.send(records, deadline: deadline)
                return review(results, from: client)
            } catch {
                // Replaced between the look-up and the send: nothing was handed over; use the new one.
                if error.code == .shutdown, !stopped.isFinished {
                    let fresh = currentClient
                    if fresh !== client {
                        client = fresh
                        continue
                    }
                }
                if error.isFatal { clientFailed(client) }
                throw error
            }
        }
    }

    /// Marks the failures a fatal client caused (purged or refused records) as fatal, so callers
    /// send them again through the replacement, and reports the client.
    private func review(
        _ results: [Result<KafkaDeliveryReport, KafkaError>], from client: ProducerClient
    ) -> [Result<KafkaDeliveryReport, KafkaError>] {
        guard results.contains(where: { if case .failure = $0 { true } else { false } }) else { return results }
        guard client.fatalError != nil else { return results }
        clientFailed(client)
        return results.map { result in
            guard case .failure(var error) = result, !error.isFatal, Self.causedByFatalClient(error) else { return result }
            error.isFatal = true
            error.isRetriable = false
            return .failure(error)
        }
    }

    /// Failures of a client that went fatal that are the client's, not the record's.
    private static func causedByFatalClient(_ error: KafkaError) -> Bool {
        error.code == .shutdown || error.disposition == .shutdown
    }

    // MARK: replacement

    /// Replaces `client` when it reports a fatal error (its stop signal fires then, and at shutdown).
    private func watch(_ client: ProducerClient) {
        let signal = client.stopSignal
        Task { [weak self] in
            await signal.wait()
            guard let self, client.fatalError != nil else { return }
            self.clientFailed(client)
        }
    }

    private func clientFailed(_ client: ProducerClient) {
        let action = clients.withLock { $0.failed(client, now: .now) }
        guard case .replace(let wait) = action else { return }
        let task = Task { [weak self] in
            if wait > .zero { try? await Task.sleep(for: wait) }
            await self?.replace(client)
        }
        clients.withLock { if !$0.stopped { $0.pending = task } }
    }

    private func replace(_ broken: ProducerClient) async {
        guard !stopped.isFinished else { return }
        let fresh: ProducerClient
        do {
            fresh = try ProducerClient(configuration: configuration, logger: logger, deadlines: deadlines)
        } catch {
            logger.error("cannot create a kafka producer client to replace a failed one", metadata: ["kafka.error": "\(error)"])
            clients.withLock { $0.replacementFailed(now: .now) }
            return
        }
        guard let retired = clients.withLock({ $0.replace(with: fresh, now: .now) }) else {
            await fresh.shutdown()
            return
        }
        watch(fresh)
        logger.error("kafka producer client hit a fatal error; replaced it", metadata: [
            "kafka.error": "\(broken.fatalError.map { "\($0)" } ?? "unknown")",
            "kafka.producer.replacements": "\(clientReplacements)",
        ])
        // Flush (its queue was purged by the fatal error) and destroy, each bounded.
        await retired.shutdown()
        clients.withLock { $0.retired(retired) }
    }
}
