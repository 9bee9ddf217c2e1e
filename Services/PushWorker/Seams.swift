import APNs
import CallContract
import Foundation

/// One VoIP push the worker asks APNs to deliver.
public struct VoIPPush: Sendable, Hashable {
    /// Key into the worker's app configuration (bundle id, credentials).
    public var app: String
    public var deviceToken: String
    public var environment: APNsEnvironment
    public var apnsID: String
    /// `apns-expiration`: the ring deadline (APNs stops trying after it).
    public var expiration: Date
    public var payload: Data
    /// The attempt must be answered by then (the worker passes the ring deadline, capped by its timeout).
    public var deadline: Date

    public init(app: String, deviceToken: String, environment: APNsEnvironment, apnsID: String,
                expiration: Date, payload: Data, deadline: Date) {
        self.app = app
        self.deviceToken = deviceToken
        self.environment = environment
        self.apnsID = apnsID
        self.expiration = expiration
        self.payload = payload
        self.deadline = deadline
    }
}

/// What one push attempt came to, as the worker needs it (the APNs adapter maps the client's
/// typed outcome to this).
public struct PushAttempt: Sendable, Hashable {
    /// What to do next (reference/apns.md's classification, as the APNs client reports it).
    public typealias Disposition = APNSDisposition

    public var disposition: Disposition
    /// HTTP status, nil when no response arrived.
    public var status: Int?
    /// Apple's reason verbatim, or a transport code (`timeout`, `connection-lost`, …).
    public var reason: String?
    public var apnsID: String?
    public var uniqueID: String?
    public var timestamp: Date?
    /// A floor for the next retry's delay (e.g. after 429).
    public var minimumRetryDelay: Duration

    public init(disposition: Disposition, status: Int? = nil, reason: String? = nil, apnsID: String? = nil,
                uniqueID: String? = nil, timestamp: Date? = nil, minimumRetryDelay: Duration = .zero) {
        self.disposition = disposition
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.uniqueID = uniqueID
        self.timestamp = timestamp
        self.minimumRetryDelay = minimumRetryDelay
    }

    var details: CallStatus.APNsDetails {
        .init(id: apnsID, uniqueId: uniqueID, status: status, reason: reason, timestamp: timestamp)
    }
}

/// Sends VoIP pushes (the APNs client in production, a fake in tests).
public protocol VoIPPushSending: Sendable {
    /// Sends one push; never throws, never hangs past `push.deadline`. After `ExpiredProviderToken`
    /// the sender has renewed the token itself (the APNs client does, at most once per token).
    func send(_ push: VoIPPush) async -> PushAttempt
}

/// Where the worker's outcomes go (Kafka in production). Each call returns once the record is
/// durable (acknowledged by the broker) or throws; with a `bound`, it throws once the bound has
/// passed without an acknowledgement (the record may still be stored).
public protocol OutcomePublishing: Sendable {
    /// Writes a status to the status topic, into partition `partition` (the request's partition number).
    func publish(status: CallStatus, partition: Int32, within bound: Duration?) async throws
    /// Writes the original request bytes to the DLQ with the contract's headers.
    func deadLetter(key: [UInt8]?, value: [UInt8], headers: [(String, String)], within bound: Duration?) async throws
    /// How to treat `error`, thrown by `publish` or `deadLetter`.
    func classify(_ error: any Error) -> OutcomeWriteFailure
}

extension OutcomePublishing {
    public func classify(_ error: any Error) -> OutcomeWriteFailure { .retriable }
}

/// How the worker treats a failed outcome write.
public enum OutcomeWriteFailure: Sendable, Hashable {
    /// Try again: the broker is unavailable, a bound ran out, the producer is being replaced.
    case retriable
    /// The record will never be accepted (too large, no such partition, not authorized): the
    /// delivery ends another way (`DeliveryProcessor` documents which).
    case permanent(code: String)
}
