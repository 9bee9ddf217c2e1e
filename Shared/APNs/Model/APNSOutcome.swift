import Foundation

/// The one result of one push: an APNs response, or a local / transport failure.
///
/// Every call to ``APNSClient/send(_:)`` yields exactly one outcome; nothing throws and nothing hangs.
public struct APNSOutcome: Sendable, CustomStringConvertible {
    /// HTTP status from APNs, `nil` when no response was received (see ``error``).
    public var status: Int?
    /// The reason from an error response body, or from the GOAWAY that ended the push's connection, verbatim
    /// if unknown.
    public var reason: APNSReason?
    /// The failure when there is no HTTP response (validation, timeout, connection lost, ...).
    public var error: APNSError?
    /// `apns-id` echoed by APNs (or the one we sent).
    public var apnsID: String?
    /// `apns-unique-id` (sandbox only).
    public var uniqueID: String?
    /// For 410: when APNs last knew the token was valid (from the body's milliseconds timestamp).
    public var timestamp: Date?
    /// Time from `send` to this outcome (queueing and transparent retries included).
    public var latency: Duration
    /// How many HTTP/2 requests were made (transparent retries on refused streams / token renewal).
    public var attempts: Int
    /// What the caller should do.
    public var disposition: APNSDisposition

    /// Builds an outcome from an HTTP response.
    public init(
        status: Int, reason: APNSReason?, apnsID: String?, uniqueID: String?, timestamp: Date?,
        latency: Duration, attempts: Int
    ) {
        self.status = status
        self.reason = reason
        self.error = nil
        self.apnsID = apnsID
        self.uniqueID = uniqueID
        self.timestamp = timestamp
        self.latency = latency
        self.attempts = attempts
        self.disposition = APNSDisposition.classify(status: status, reason: reason)
    }

    /// Builds an outcome for a failure without an HTTP response (with Apple's reason when the error has one).
    public init(error: APNSError, apnsID: String?, latency: Duration, attempts: Int) {
        self.status = nil
        self.reason = error.reason
        self.error = error
        self.apnsID = apnsID
        self.uniqueID = nil
        self.timestamp = nil
        self.latency = latency
        self.attempts = attempts
        self.disposition = error.disposition
    }

    /// `true` when APNs accepted the push.
    public var isSent: Bool { disposition == .sent }

    /// A stable short code for metrics and logs: `sent`, the APNs reason, or the error code.
    public var code: String {
        if let reason { return reason.rawValue }
        if let error { return error.code.rawValue }
        if let status { return status == 200 ? "sent" : "http-\(status)" }
        return "unknown"
    }

    public var description: String {
        "APNSOutcome(\(disposition.rawValue), code: \(code), status: \(status.map(String.init) ?? "-"), attempts: \(attempts))"
    }
}
