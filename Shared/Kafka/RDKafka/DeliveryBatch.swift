import CRdKafka
import Synchronization
import Locking

/// What librdkafka reported for one message.
struct DeliveryOutcome {
    var err: Int32 = 0
    var status: Int32 = 0
    var partition: Int32 = -1
    var offset: Int64 = -1

    /// Not a librdkafka code: the producer shut down before the message was handed over.
    static let shutdownCode = Int32.min
    /// Not a librdkafka code: the caller's deadline passed before the message was handed over.
    static let deadlineCode = Int32.min + 1
}

/// The per-message opaque handed to librdkafka: which batch, which index.
struct DeliverySlot {
    var batch: Unmanaged<DeliveryBatch>
    var index: Int
}

/// Collects the delivery reports of a group of messages sent together and resumes the
/// sender once, when the last report arrived (one continuation per batch, no per-message
/// lock or task).
///
/// `@unchecked Sendable`: `outcomes[i]` is written exactly once, either by the sender
/// (synchronous produce failure) or by the thread serving delivery reports (the poll thread,
/// or a `flush` thread); it is read only
/// after `remaining` reached zero, whose atomic decrement (acquiring-releasing) orders the
/// writes before the read. After an ``expire()`` the sender reads only the slots it wrote itself.
/// The continuation is behind a lock.
///
/// librdkafka's opaques point at the batch without retaining it: the sender keeps it alive while
/// it waits, and an expired batch keeps itself alive (`keepAlive`) until its last report arrived.
final class DeliveryBatch: @unchecked Sendable {
    private struct Completion {
        var done = false
        var expired = false
        var continuation: CheckedContinuation<Bool, Never>?
        var keepAlive: DeliveryBatch?
    }

    let count: Int
    let slots: UnsafeMutablePointer<DeliverySlot>
    let outcomes: UnsafeMutablePointer<DeliveryOutcome>
    /// Reports still expected, plus one held by the sender until it has produced everything.
    private let remaining: Atomic<Int>
    private let completion = Locked(Completion())

    init(count: Int) {
        self.count = count
        self.remaining = Atomic(count + 1)
        self.slots = .allocate(capacity: max(count, 1))
        self.outcomes = .allocate(capacity: max(count, 1))
        outcomes.initialize(repeating: DeliveryOutcome(), count: max(count, 1))
        let unmanaged = Unmanaged.passUnretained(self)
        for index in 0..<count {
            (slots + index).initialize(to: DeliverySlot(batch: unmanaged, index: index))
        }
    }

    deinit {
        slots.deinitialize(count: count)
        slots.deallocate()
        outcomes.deinitialize(count: max(count, 1))
        outcomes.deallocate()
    }

    /// The opaque pointer for message `index`.
    func opaque(for index: Int) -> UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(slots + index)
    }

    /// Records a synchronous failure of message `index` (it will get no delivery report).
    func fail(index: Int, err: rd_kafka_resp_err_t) {
        outcomes[index] = DeliveryOutcome(err: err.rawValue, status: Int32(bitPattern: RD_KAFKA_MSG_STATUS_NOT_PERSISTED.rawValue))
        arrive()
    }

    /// Called from the delivery-report callback (poll or flush thread).
    static func deliver(_ message: UnsafePointer<rd_kafka_message_t>) {
        guard let opaque = message.pointee._private else { return }
        let slot = opaque.assumingMemoryBound(to: DeliverySlot.self).pointee
        let batch = slot.batch.takeUnretainedValue()
        batch.outcomes[slot.index] = DeliveryOutcome(
            err: message.pointee.err.rawValue,
            status: Int32(bitPattern: rd_kafka_message_status(message).rawValue),
            partition: message.pointee.partition,
            offset: message.pointee.offset
        )
        batch.arrive()
    }

    /// The sender finished producing: gives up its hold and waits for the remaining reports.
    /// Returns `true` once every report arrived, `false` if ``expire()`` came first.
    func senderDoneAndWait() async -> Bool {
        arrive()
        let answered = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let resumeNow = completion.withLock { state -> Bool? in
                if state.done { return true }
                if state.expired { return false }
                state.continuation = continuation
                return nil
            }
            if let resumeNow { continuation.resume(returning: resumeNow) }
        }
        // The reporting thread set `done` under this lock before it resumed us; taking the lock
        // once more makes that ordering visible to ThreadSanitizer, which does not learn it from a
        // continuation resumed on a foreign thread (docs/reliability.md, "Sanitizers").
        completion.withLock { _ in }
        return answered
    }

    /// The caller's deadline passed: the waiting sender returns now (unless every report already
    /// arrived); the batch lives on until librdkafka reported every message.
    func expire() {
        let continuation = completion.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard !state.done, !state.expired else { return nil }
            state.expired = true
            state.keepAlive = self
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: false)
    }

    private func arrive() {
        guard remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        let (continuation, keepAlive) = completion.withLock { state -> (CheckedContinuation<Bool, Never>?, DeliveryBatch?) in
            state.done = true
            defer {
                state.continuation = nil
                state.keepAlive = nil
            }
            return (state.continuation, state.keepAlive)
        }
        continuation?.resume(returning: true)
        // An expired batch is released only here, after its last use.
        withExtendedLifetime(keepAlive) {}
    }

    /// The outcome of message `index` as a result (call after `senderDoneAndWait`).
    func result(index: Int, topic: String) -> Result<KafkaDeliveryReport, KafkaError> {
        let outcome = outcomes[index]
        if outcome.err == DeliveryOutcome.shutdownCode {
            var error = KafkaError.shutdown("producer")
            error.persistenceStatus = .notPersisted
            return .failure(error)
        }
        if outcome.err == DeliveryOutcome.deadlineCode {
            return .failure(KafkaError(
                code: .timeout, message: "the caller's bound passed while waiting for room in the local queue for '\(topic)'",
                isRetriable: true, persistenceStatus: .notPersisted
            ))
        }
        guard outcome.err == 0 else {
            let err = rd_kafka_resp_err_t(rawValue: outcome.err)
            var error = KafkaError(rdKafka: err, context: "delivery to '\(topic)' failed")
            error.persistenceStatus = Self.persistence(outcome.status)
            return .failure(error)
        }
        return .success(KafkaDeliveryReport(topic: topic, partition: outcome.partition, offset: outcome.offset))
    }

    private static func persistence(_ status: Int32) -> KafkaError.PersistenceStatus {
        switch rd_kafka_msg_status_t(rawValue: UInt32(bitPattern: status)) {
        case RD_KAFKA_MSG_STATUS_PERSISTED: return .persisted
        case RD_KAFKA_MSG_STATUS_POSSIBLY_PERSISTED: return .possiblyPersisted
        default: return .notPersisted
        }
    }
}
