import Foundation
import HeapModule
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
        configuration.linger = .milliseconds(1)
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
    public func publish(_ records: [KafkaProducerRecord]) async throws(DispatchProblem) -> [Int32] {
        let producer = currentProducer()
        let outcome = await Self.bounded(publishTimeout + .milliseconds(500)) {
            try await producer.send(records)
        }
        guard let results = outcome else {
            throw DispatchProblem.unavailable(retryAfter: retryAfter, detail: "Kafka did not acknowledge within \(publishTimeout)")
        }
        var partitions: [Int32] = []
        do {
            for result in try results.get() { partitions.append(try result.get().partition) }
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

    /// Runs `body` in its own task and returns its result, or nil when `bound` passes first (the
    /// body keeps running to its own end; librdkafka bounds it by `message.timeout.ms`).
    static func bounded<T: Sendable>(
        _ bound: Duration, deadlines: Deadlines = .shared, _ body: @escaping @Sendable () async throws -> T
    ) async -> Result<T, any Error>? {
        let once = ResumeOnce<Result<T, any Error>?>()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, any Error>?, Never>) in
            once.set(continuation)
            let deadline = deadlines.add(after: bound) { once.resume(nil) }
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                deadlines.remove(deadline)
                once.resume(result)
            }
        }
    }
}

/// Deadlines of many concurrent awaits, watched by one shared sweeper task that looks every
/// `resolution` (and exists only while something is pending).
///
/// A sleeping task per bounded call, cancelled when the call finished first, cost dispatch a
/// measurable share of its `POST /v1/calls` throughput (docs/benchmarks.md); a deadline here is a
/// heap insert and a dictionary remove under a lock. An expired deadline fires up to `resolution` late.
final class Deadlines: Sendable {
    static let shared = Deadlines()
    static let resolution: Duration = .milliseconds(50)

    private struct Entry {
        let deadline: ContinuousClock.Instant
        let expire: @Sendable () -> Void
    }
    /// A deadline in the heap; ones removed early stay there until they come up, then are skipped.
    private struct Due: Comparable {
        let deadline: ContinuousClock.Instant
        let id: UInt64
        static func < (a: Due, b: Due) -> Bool { (a.deadline, a.id) < (b.deadline, b.id) }
    }
    private struct State {
        var entries: [UInt64: Entry] = [:]
        /// The earliest deadline first: a sweep looks only at what is due, not at every pending call.
        var due = Heap<Due>()
        var nextID: UInt64 = 0
        var sweeping = false
    }
    private let state = Locked(State())

    /// Registers `expire` to run once `bound` has passed, unless removed before.
    func add(after bound: Duration, _ expire: @escaping @Sendable () -> Void) -> UInt64 {
        let deadline = ContinuousClock.now + bound
        let (id, startSweeper) = state.withLock { state -> (UInt64, Bool) in
            state.nextID &+= 1
            state.entries[state.nextID] = Entry(deadline: deadline, expire: expire)
            state.due.insert(Due(deadline: deadline, id: state.nextID))
            defer { state.sweeping = true }
            return (state.nextID, !state.sweeping)
        }
        if startSweeper { Task { await self.sweep() } }
        return id
    }

    /// Deadlines not yet expired or removed.
    var pendingCount: Int { state.withLock { $0.entries.count } }

    /// Forgets a deadline (its call finished first).
    func remove(_ id: UInt64) {
        _ = state.withLock { $0.entries.removeValue(forKey: id) }
    }

    private func sweep() async {
        while true {
            try? await Task.sleep(for: Self.resolution)
            let now = ContinuousClock.now
            let (expired, more) = state.withLock { state -> ([@Sendable () -> Void], Bool) in
                var expired: [@Sendable () -> Void] = []
                while let next = state.due.min, next.deadline <= now {
                    state.due.removeMin()
                    if let entry = state.entries.removeValue(forKey: next.id) { expired.append(entry.expire) }
                }
                if state.entries.isEmpty {
                    state.due = Heap()
                    state.sweeping = false
                }
                return (expired, state.sweeping)
            }
            for expire in expired { expire() }
            if !more { return }
        }
    }
}

/// A continuation resumed by whichever of several racers comes first.
final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation = Locked<CheckedContinuation<T, Never>?>(nil)

    func set(_ continuation: CheckedContinuation<T, Never>) {
        self.continuation.withLock { $0 = continuation }
    }

    func resume(_ value: T) {
        continuation.withLock { $0.take() }?.resume(returning: value)
    }
}
