/// A failure that is not an FCM HTTP answer: local validation, the access token, transport, or client state.
///
/// `code` is stable and meant for metrics, DLQ headers and alerts; `message` is for humans and never holds a
/// registration token, a key or an access token.
public struct FCMError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable machine-readable failure codes.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The registration token is empty, too long or has characters FCM tokens never have; refused before sending.
        public static let invalidRegistrationToken = Code(rawValue: "invalid-registration-token")
        /// The data (keys and values, UTF-8 bytes) is over FCM's 4096-byte limit; refused before sending.
        public static let dataTooLarge = Code(rawValue: "data-too-large")
        /// A data key is empty or reserved (`from`, `message_type`, `google.*`, `gcm.*`), or the collapse key is
        /// empty or over 256 bytes; refused before sending.
        public static let invalidData = Code(rawValue: "invalid-data")
        /// The message's deadline has passed: nothing was sent (a TTL is never negative).
        public static let deadlinePassed = Code(rawValue: "deadline-passed")
        /// The message names an app the client has no service account for.
        public static let unknownApp = Code(rawValue: "unknown-app")
        /// No answer before the request's deadline (the message may have been delivered).
        public static let timeout = Code(rawValue: "timeout")
        /// The connection closed after the request went out and before its answer: it may have been delivered.
        public static let connectionLost = Code(rawValue: "connection-lost")
        /// TCP connect failed (refused, unreachable, DNS, connect timeout). Nothing was sent.
        public static let connectFailed = Code(rawValue: "connect-failed")
        /// TLS failed (handshake, certificate verification). Nothing was sent.
        public static let tlsFailure = Code(rawValue: "tls-failure")
        /// Another transport failure (the message may have been delivered).
        public static let transportFailure = Code(rawValue: "transport-failure")
        /// FCM answered something that is not FCM's JSON, or a body over the client's bound.
        public static let protocolError = Code(rawValue: "protocol-error")
        /// Too many requests are already in flight (``FCMClientConfiguration/maxPendingRequests``). Nothing was sent.
        public static let queueFull = Code(rawValue: "queue-full")
        /// The client is shutting down and takes no new messages. Nothing was sent.
        public static let shuttingDown = Code(rawValue: "shutting-down")
        /// The send was cancelled (task cancellation).
        public static let cancelled = Code(rawValue: "cancelled")
        /// No access token: the token endpoint was unreachable, slow or answered 5xx/429. Nothing was sent.
        public static let tokenUnavailable = Code(rawValue: "token-unavailable")
        /// The token endpoint refused the service account (`invalid_grant`, `invalid_client`, …). Nothing was sent.
        public static let tokenRefused = Code(rawValue: "token-refused")
        /// Signing the JWT grant with the service account's key failed. Nothing was sent.
        public static let signingFailed = Code(rawValue: "signing-failed")
    }

    /// The stable code.
    public var code: Code
    /// Human-readable detail.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// What a caller should do.
    public var disposition: FCMDisposition {
        switch code {
        case .invalidRegistrationToken: .tokenDead
        case .dataTooLarge, .invalidData, .unknownApp, .protocolError: .requestInvalid
        case .tokenRefused, .signingFailed: .credentialsInvalid
        // deadline-passed: nothing can be sent any more, and the caller's retry loop ends the delivery as
        // expired by its own deadline (the same reading as the worker's APNs sender).
        default: .retry
        }
    }

    /// Whether the same message may succeed when tried again later.
    public var isRetryable: Bool { disposition == .retry && code != .deadlinePassed }

    /// Whether the message certainly did not reach FCM (safe to retry without any duplicate risk).
    public var wasNotSent: Bool {
        switch code {
        case .timeout, .connectionLost, .transportFailure, .cancelled, .protocolError: false
        default: true
        }
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
