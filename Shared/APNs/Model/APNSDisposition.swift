/// What the caller should do with a push after an outcome (callpush's reading of Apple's table).
public enum APNSDisposition: String, Sendable, Hashable, CaseIterable {
    /// APNs accepted the push (HTTP 200).
    case sent
    /// Transient: retry later with backoff (429, 500, 503, `IdleTimeout`, timeouts, lost connections, refused
    /// streams).
    case retry
    /// The provider token expired: the client has renewed it (see `APNSTokenProvider`); retry once.
    case renewTokenAndRetry
    /// The device token is dead or wrong (400 BadDeviceToken / DeviceTokenNotForTopic, 410): tell the backend.
    case tokenDead
    /// Our request or configuration is wrong (other 400s, 404, 405, 413, local validation): do not retry; alert.
    case requestInvalid
    /// The credentials are wrong (403 other than ExpiredProviderToken): do not retry; alert, stop the backlog.
    case credentialsInvalid

    /// Whether retrying the same push can succeed.
    public var isRetryable: Bool { self == .retry || self == .renewTokenAndRetry }

    /// Classifies an HTTP response from APNs by status and reason.
    ///
    /// The reason decides when it is known (APNs' table); otherwise the status class does, so a new
    /// reason under a known status is still handled sensibly.
    public static func classify(status: Int, reason: APNSReason?) -> APNSDisposition {
        if status == 200 { return .sent }
        if let reason, let disposition = classify(reason: reason) { return disposition }
        switch status {
        case 410: return .tokenDead
        case 403: return .credentialsInvalid
        case 429, 500...599: return .retry
        default: return .requestInvalid
        }
    }

    /// What APNs' table says about a documented reason, whether it came in an answer's body or in a GOAWAY's
    /// debug data; `nil` for a reason this client does not know.
    ///
    /// `IdleTimeout` is about the connection, not the push: the connection is replaced and the push retried.
    public static func classify(reason: APNSReason) -> APNSDisposition? {
        switch reason {
        case .badDeviceToken, .deviceTokenNotForTopic, .unregistered, .expiredToken:
            return .tokenDead
        case .expiredProviderToken:
            return .renewTokenAndRetry
        case .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown,
            .idleTimeout:
            return .retry
        case .badCertificate, .badCertificateEnvironment, .forbidden, .invalidProviderToken, .missingProviderToken,
            .unrelatedKeyIDInToken, .badEnvironmentKeyIDInToken, .badEnvironmentKeyInToken:
            return .credentialsInvalid
        case .badCollapseID, .badExpirationDate, .badMessageID, .badPriority, .badTopic, .duplicateHeaders,
            .invalidPushType, .missingDeviceToken, .missingTopic, .payloadEmpty, .topicDisallowed, .badPath,
            .methodNotAllowed, .payloadTooLarge:
            return .requestInvalid
        case .unknown:
            return nil
        }
    }
}
