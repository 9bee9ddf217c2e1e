/// The one result of one send: an FCM answer, or a local / token / transport failure.
///
/// Every call to ``FCMClient/send(_:)`` yields exactly one outcome; nothing throws and nothing hangs.
public struct FCMOutcome: Sendable, CustomStringConvertible {
    /// HTTP status from FCM, `nil` when no answer was received (see ``error``).
    public var status: Int?
    /// The `errorCode` of the answer's `FcmError` detail, verbatim if unknown.
    public var errorCode: FCMErrorCode?
    /// The answer's `google.rpc.Status` `status` (`NOT_FOUND`, `UNAUTHENTICATED`, …).
    public var rpcStatus: String?
    /// The answer's `google.rpc.Status` `message` (at most 300 characters).
    public var errorMessage: String?
    /// The failure when there is no usable FCM answer (validation, deadline, token, transport).
    public var error: FCMError?
    /// FCM's message name, `projects/<project>/messages/<id>`, when FCM accepted the message.
    public var messageName: String?
    /// How long FCM asked to wait (`Retry-After`, on 429 and 503), at most one hour.
    public var retryAfter: Duration?
    /// Time from `send` to this outcome (access token and the renewal retry included).
    public var latency: Duration
    /// How many HTTP requests to `messages:send` were made (a 401 renews the access token and retries once).
    public var attempts: Int
    /// What the caller should do.
    public var disposition: FCMDisposition

    /// Builds an outcome from an FCM answer.
    public init(
        status: Int, errorCode: FCMErrorCode?, rpcStatus: String?, errorMessage: String?, tokenViolation: Bool,
        messageName: String?, retryAfter: Duration?, latency: Duration, attempts: Int
    ) {
        self.status = status
        self.errorCode = errorCode
        self.rpcStatus = rpcStatus
        self.errorMessage = errorMessage
        self.error = nil
        self.messageName = messageName
        self.retryAfter = retryAfter
        self.latency = latency
        self.attempts = attempts
        self.disposition = FCMDisposition.classify(status: status, errorCode: errorCode, tokenViolation: tokenViolation)
    }

    /// Builds an outcome for a failure without a usable FCM answer.
    public init(error: FCMError, latency: Duration, attempts: Int) {
        self.status = nil
        self.errorCode = nil
        self.rpcStatus = nil
        self.errorMessage = nil
        self.error = error
        self.messageName = nil
        self.retryAfter = nil
        self.latency = latency
        self.attempts = attempts
        self.disposition = error.disposition
    }

    /// `true` when FCM accepted the message.
    public var isSent: Bool { disposition == .sent }

    /// A stable short code for metrics, logs and DLQ reasons: `sent`, the FCM error code, the
    /// `google.rpc` status, `http-<status>`, or the local error code.
    public var code: String {
        if let error { return error.code.rawValue }
        if let status, (200..<300).contains(status) { return "sent" }
        if let errorCode { return errorCode.rawValue }
        if let rpcStatus { return rpcStatus }
        if let status { return "http-\(status)" }
        return "unknown"
    }

    public var description: String {
        "FCMOutcome(\(disposition.rawValue), code: \(code), status: \(status.map(String.init) ?? "-"), attempts: \(attempts))"
    }
}
