
/// An error from the Kafka layer.
///
/// Every error has a stable ``code`` (for librdkafka errors: the librdkafka error name,
/// e.g. `_QUEUE_FULL` or `NOT_LEADER_FOR_PARTITION`), a human readable ``message`` and
/// classification flags: ``isRetriable`` (the operation may succeed if tried again) and
/// ``isFatal`` (the client instance is unusable and must be recreated).
public struct KafkaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable, machine readable error code.
    public struct Code: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
        /// The code as a string; stable across releases.
        public let rawValue: String

        /// Creates a code from its string form.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Creates a code from a string literal.
        public init(stringLiteral value: String) { self.rawValue = value }

        public var description: String { rawValue }

        /// A configuration property was rejected or its value could not be loaded.
        public static let configuration: Code = "configuration"
        /// The client was shut down (or is shutting down) and cannot accept the request.
        public static let shutdown: Code = "shutdown"
        /// A bounded wait ran out (e.g. waiting for room in a full producer queue).
        public static let timeout: Code = "timeout"
        /// The partition is not assigned to this consumer (librdkafka `_STATE`).
        public static let notAssigned: Code = "not_assigned"
        /// The consumer is not in the right mode for this call (e.g. `assign` on a group consumer).
        public static let invalidUsage: Code = "invalid_usage"
    }

    /// Whether a message affected by a failed delivery might nevertheless be stored by the broker.
    public enum PersistenceStatus: String, Sendable, Hashable {
        /// The message was never sent to the broker, or failed with an error that shows it was not stored.
        case notPersisted = "not_persisted"
        /// The message was sent but no acknowledgement arrived: it may or may not be stored.
        case possiblyPersisted = "possibly_persisted"
        /// The broker acknowledged the message.
        case persisted = "persisted"
    }

    /// What a caller should do about an error: the classification callers act on, so that no
    /// caller keeps its own list of librdkafka codes.
    ///
    /// For a producer's per-record results:
    /// - ``retriable``: transient (timeouts, leader changes, a full local queue, ``Code/timeout``);
    ///   send the record again, with a back-off.
    /// - ``recordRejected``: this record can never be stored as it is (larger than
    ///   `message.max.bytes`, a partition or topic the cluster does not have, an invalid record);
    ///   sending it again fails the same way. End its processing in a defined way (e.g. a
    ///   dead-letter record with the reason).
    /// - ``unauthorized``: the client lacks a permission (topic, group or cluster ACL, failed
    ///   authentication). Nothing the record can change; an operator has to. Retrying succeeds only
    ///   once they did.
    /// - ``fatal``: the client instance failed for good (e.g. the idempotent producer lost its
    ///   sequence). A ``KafkaProducer`` replaces its client by itself: send again.
    /// - ``shutdown``: the client was shut down; do not retry on it.
    /// - ``permanent``: the request cannot succeed for a reason that is not the record's
    ///   (configuration, a feature the broker does not support, invalid use of the API).
    public enum Disposition: String, Sendable, Hashable, CaseIterable {
        case retriable
        case recordRejected = "record_rejected"
        case unauthorized
        case fatal
        case shutdown
        case permanent
    }

    /// The stable error code.
    public var code: Code
    /// A human readable description (never contains secrets).
    public var message: String
    /// The librdkafka error code (`rd_kafka_resp_err_t` raw value), if the error came from librdkafka.
    public var rdKafkaCode: Int32?
    /// Whether trying the operation again may succeed.
    public var isRetriable: Bool
    /// Whether the client instance is unusable and must be recreated.
    public var isFatal: Bool
    /// For delivery failures: whether the message may have been stored anyway (`rd_kafka_message_status`).
    public var persistenceStatus: PersistenceStatus?

    /// Creates an error.
    public init(
        code: Code,
        message: String,
        rdKafkaCode: Int32? = nil,
        isRetriable: Bool = false,
        isFatal: Bool = false,
        persistenceStatus: PersistenceStatus? = nil
    ) {
        self.code = code
        self.message = message
        self.rdKafkaCode = rdKafkaCode
        self.isRetriable = isRetriable
        self.isFatal = isFatal
        self.persistenceStatus = persistenceStatus
    }

    public var description: String {
        var text = "KafkaError(\(code)): \(message)"
        if isFatal { text += " [fatal]" }
        if isRetriable { text += " [retriable]" }
        if let persistenceStatus { text += " [\(persistenceStatus.rawValue)]" }
        return text
    }
}

extension KafkaError {
    /// What a caller should do about this error (see ``Disposition``).
    public var disposition: Disposition {
        if isFatal { return .fatal }
        if code == .shutdown { return .shutdown }
        if code == .timeout { return .retriable }
        if let raw = rdKafkaCode {
            if Self.shutdownCodes.contains(raw) { return .shutdown }
            if Self.unauthorizedCodes.contains(raw) { return .unauthorized }
            if Self.recordRejectedCodes.contains(raw) { return .recordRejected }
        }
        return isRetriable ? .retriable : .permanent
    }

    static func shutdown(_ what: String) -> KafkaError {
        KafkaError(code: .shutdown, message: "\(what) is shut down")
    }
}
