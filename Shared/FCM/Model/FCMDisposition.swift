/// What the caller should do with a message after an outcome (callpush's reading of FCM's error table).
///
/// The same cases the worker uses for APNs (``FCMDisposition/sent`` … ``FCMDisposition/credentialsInvalid``),
/// kept in this module so the FCM client depends on nothing APNs; the worker maps both.
public enum FCMDisposition: String, Sendable, Hashable, CaseIterable {
    /// FCM accepted the message (HTTP 200; the outcome carries its message name).
    case sent
    /// Transient: retry later with backoff, never past the ring deadline (`QUOTA_EXCEEDED` honouring
    /// `Retry-After`, `UNAVAILABLE`, `INTERNAL`, timeouts, lost connections, the token endpoint unreachable).
    case retry
    /// The registration token is dead or wrong (`UNREGISTERED`, `INVALID_ARGUMENT` on `message.token`): forget it.
    case tokenDead
    /// Our request is wrong (other `INVALID_ARGUMENT`s, data over 4 KB, reserved keys): do not retry; alert.
    case requestInvalid
    /// The credentials are refused (`SENDER_ID_MISMATCH`, `THIRD_PARTY_AUTH_ERROR`, 401 after a renewed
    /// access token, 403, the token endpoint refusing the service account): do not retry; stop the backlog.
    case credentialsInvalid

    /// Whether retrying the same message can succeed.
    public var isRetryable: Bool { self == .retry }

    /// Classifies an HTTP answer from FCM.
    ///
    /// The FCM error code decides when there is one; otherwise the HTTP status class does, so a new
    /// code under a known status is still handled sensibly.
    /// - Parameter tokenViolation: the answer's `google.rpc.BadRequest` names `message.token`.
    public static func classify(status: Int, errorCode: FCMErrorCode?, tokenViolation: Bool) -> FCMDisposition {
        if (200..<300).contains(status) { return .sent }
        switch errorCode {
        case .unregistered?:
            return .tokenDead
        case .invalidArgument?:
            return tokenViolation ? .tokenDead : .requestInvalid
        case .senderIDMismatch?, .thirdPartyAuthError?:
            return .credentialsInvalid
        case .quotaExceeded?, .unavailable?, .internal?:
            return .retry
        case .unspecifiedError?, .unknown?, nil:
            switch status {
            case 400: return tokenViolation ? .tokenDead : .requestInvalid
            case 401, 403: return .credentialsInvalid
            case 429, 500...599: return .retry
            default: return .requestInvalid
            }
        }
    }
}
