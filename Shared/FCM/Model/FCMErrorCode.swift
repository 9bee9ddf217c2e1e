/// The `errorCode` of FCM's `google.firebase.fcm.v1.FcmError` detail, one case per code FCM documents.
///
/// Codes FCM adds later are kept verbatim in ``unknown(_:)`` and never dropped.
public enum FCMErrorCode: Sendable, Hashable, CustomStringConvertible {
    /// No more information is available about this error.
    case unspecifiedError
    /// A request parameter was invalid (400); on `message.token` the token is not a valid registration token.
    case invalidArgument
    /// The registration token is no longer valid: the app was uninstalled or the token expired (404).
    case unregistered
    /// The sender (service account's project) is not the one the token belongs to (403).
    case senderIDMismatch
    /// The message rate limit (per project, device or topic) was exceeded (429; honour `Retry-After`).
    case quotaExceeded
    /// The server is overloaded (503; honour `Retry-After` when given).
    case unavailable
    /// An unknown internal error occurred (500).
    case `internal`
    /// The APNs certificate or web push auth key was invalid or missing (401).
    case thirdPartyAuthError
    /// A code this client does not know, exactly as FCM sent it.
    case unknown(String)

    /// Every documented code (without ``unknown(_:)``).
    public static let allKnown: [FCMErrorCode] = [
        .unspecifiedError, .invalidArgument, .unregistered, .senderIDMismatch, .quotaExceeded, .unavailable,
        .internal, .thirdPartyAuthError,
    ]

    /// Parses a code; unknown strings become ``unknown(_:)`` verbatim.
    public init(rawValue: String) {
        self = Self.allKnown.first { $0.rawValue == rawValue } ?? .unknown(rawValue)
    }

    /// The exact string FCM uses.
    public var rawValue: String {
        switch self {
        case .unspecifiedError: "UNSPECIFIED_ERROR"
        case .invalidArgument: "INVALID_ARGUMENT"
        case .unregistered: "UNREGISTERED"
        case .senderIDMismatch: "SENDER_ID_MISMATCH"
        case .quotaExceeded: "QUOTA_EXCEEDED"
        case .unavailable: "UNAVAILABLE"
        case .internal: "INTERNAL"
        case .thirdPartyAuthError: "THIRD_PARTY_AUTH_ERROR"
        case .unknown(let raw): raw
        }
    }

    /// The HTTP status FCM sends with this code (`nil` for ``unknown(_:)`` and ``unspecifiedError``).
    public var expectedStatus: Int? {
        switch self {
        case .invalidArgument: 400
        case .unregistered: 404
        case .senderIDMismatch: 403
        case .quotaExceeded: 429
        case .unavailable: 503
        case .internal: 500
        case .thirdPartyAuthError: 401
        case .unspecifiedError, .unknown: nil
        }
    }

    public var description: String { rawValue }
}
