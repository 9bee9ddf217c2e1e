/// A failure that is not an APNs HTTP response: local validation, transport, or client state.
///
/// `code` is stable and meant for metrics, DLQ headers and alerts; `message` is for humans.
public struct APNSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable machine-readable failure codes.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The payload is larger than APNs' 5120-byte VoIP limit; refused before sending.
        public static let payloadTooLarge = Code(rawValue: "payload-too-large")
        /// The payload is empty; refused before sending.
        public static let payloadEmpty = Code(rawValue: "payload-empty")
        /// The device token is not a non-empty even-length hex string; refused before sending.
        public static let invalidDeviceToken = Code(rawValue: "invalid-device-token")
        /// The push names an app the client has no credentials for.
        public static let unknownApp = Code(rawValue: "unknown-app")
        /// No response before the request's deadline (queueing, connecting and waiting included).
        public static let timeout = Code(rawValue: "timeout")
        /// The push waited for a free HTTP/2 stream until its deadline passed: it was never written, so it
        /// certainly did not reach APNs (safe to retry, no duplicate risk).
        public static let queueTimeout = Code(rawValue: "queue-timeout")
        /// The connection closed after the request was sent and before its response: it may have been delivered.
        public static let connectionLost = Code(rawValue: "connection-lost")
        /// The server refused the stream (REFUSED_STREAM or above GOAWAY's last stream id) and the
        /// deadline left no time for another attempt. The push was not processed. (When the GOAWAY carried a
        /// reason, the outcome has that reason and its disposition.)
        public static let refusedStream = Code(rawValue: "refused-stream")
        /// The server reset the stream with an error code other than REFUSED_STREAM.
        public static let streamReset = Code(rawValue: "stream-reset")
        /// TLS failed (handshake, certificate verification, ALPN without h2).
        public static let tlsFailure = Code(rawValue: "tls-failure")
        /// TCP connect or the HTTP/2 preface failed (DNS, refused, unreachable, connect timeout), or APNs closed
        /// the connection before answering any request on it (then with its reason, if it gave one).
        public static let connectFailed = Code(rawValue: "connect-failed")
        /// Too many requests already wait for a stream on this pool.
        public static let queueFull = Code(rawValue: "queue-full")
        /// The client is shutting down and takes no new pushes.
        public static let shuttingDown = Code(rawValue: "shutting-down")
        /// The server sent something that is not a valid APNs response.
        public static let protocolError = Code(rawValue: "protocol-error")
        /// Signing the provider token failed.
        public static let signingFailed = Code(rawValue: "signing-failed")
    }

    /// The stable code.
    public var code: Code
    /// Human-readable detail (never contains a full device token or secret).
    public var message: String
    /// Apple's reason when APNs gave one without an HTTP answer: in the debug data of the GOAWAY that closed the
    /// connection (`{"reason":"BadCertificateEnvironment"}`). A known reason decides the disposition.
    public internal(set) var reason: APNSReason?

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    init(_ code: Code, _ message: String, reason: APNSReason?) {
        self.code = code
        self.message = message
        self.reason = reason
    }

    /// Whether the same push may succeed when tried again later.
    public var isRetryable: Bool {
        if let reason, let disposition = APNSDisposition.classify(reason: reason) { return disposition.isRetryable }
        switch code {
        case .timeout, .queueTimeout, .connectionLost, .refusedStream, .streamReset, .tlsFailure, .connectFailed,
            .queueFull, .protocolError:
            return true
        default:
            return false
        }
    }

    /// Whether the request itself can never succeed (validation, configuration).
    public var isFatal: Bool {
        switch code {
        case .payloadTooLarge, .payloadEmpty, .invalidDeviceToken, .unknownApp, .signingFailed: true
        default: false
        }
    }

    /// Whether the push certainly did not reach APNs (safe to retry without any duplicate risk).
    public var wasNotSent: Bool {
        switch code {
        case .connectionLost, .timeout, .streamReset, .protocolError: false
        default: true
        }
    }

    /// The disposition a caller should apply.
    public var disposition: APNSDisposition {
        if let reason, let disposition = APNSDisposition.classify(reason: reason) { return disposition }
        if isRetryable { return .retry }
        return .requestInvalid
    }

    public var description: String {
        reason.map { "\(code.rawValue) (\($0.rawValue)): \(message)" } ?? "\(code.rawValue): \(message)"
    }
}
