import Foundation

/// Faults the simulator injects. Settable at start (``FCMSimulatorConfiguration/faults``) and at run time
/// (``FCMSimulator/setFaults(_:)`` or `PUT /admin/faults`). Every property defaults to "no fault".
public struct FCMSimulatorFaults: Sendable, Codable, Equatable {
    /// Registration token → the error every (valid) message to it gets, e.g. `UNREGISTERED`.
    public var tokenOutcomes: [String: FCMSimulatedError]
    /// Errors for messages that would otherwise be accepted: with a probability, inside a time window, and
    /// optionally only for the next `count` messages (a burst).
    public var errorRate: FCMErrorInjection?
    /// Delay before every `messages:send` answer, uniform in `minimumMilliseconds...maximumMilliseconds`.
    public var latency: FCMLatency?
    /// Failures of the token endpoint.
    public var tokenEndpoint: FCMTokenEndpointFault?
    /// Overrides the lifetime (`expires_in`) of access tokens issued from now on.
    public var accessTokenLifetimeSeconds: Int?

    public init(
        tokenOutcomes: [String: FCMSimulatedError] = [:], errorRate: FCMErrorInjection? = nil, latency: FCMLatency? = nil,
        tokenEndpoint: FCMTokenEndpointFault? = nil, accessTokenLifetimeSeconds: Int? = nil
    ) {
        self.tokenOutcomes = tokenOutcomes
        self.errorRate = errorRate
        self.latency = latency
        self.tokenEndpoint = tokenEndpoint
        self.accessTokenLifetimeSeconds = accessTokenLifetimeSeconds
    }

    enum CodingKeys: String, CodingKey { case tokenOutcomes, errorRate, latency, tokenEndpoint, accessTokenLifetimeSeconds }

    /// Decodes faults from JSON; every key is optional.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        tokenOutcomes = try c.decodeIfPresent([String: FCMSimulatedError].self, forKey: .tokenOutcomes) ?? [:]
        errorRate = try c.decodeIfPresent(FCMErrorInjection.self, forKey: .errorRate)
        latency = try c.decodeIfPresent(FCMLatency.self, forKey: .latency)
        tokenEndpoint = try c.decodeIfPresent(FCMTokenEndpointFault.self, forKey: .tokenEndpoint)
        accessTokenLifetimeSeconds = try c.decodeIfPresent(Int.self, forKey: .accessTokenLifetimeSeconds)
    }

    /// Checks the values are usable; throws an ``FCMSimulatorError`` naming the bad field.
    public func validate() throws {
        for (token, outcome) in tokenOutcomes {
            guard !token.isEmpty, token.utf8.count <= 4096 else { throw FCMSimulatorError.invalidFaults("tokenOutcomes: empty or oversized token") }
            try outcome.validate("tokenOutcomes")
        }
        if let errorRate {
            try errorRate.error.validate("errorRate")
            try FCMSimulatorError.checkProbability(errorRate.probability, "errorRate.probability")
            try FCMSimulatorError.check(errorRate.count, atLeast: 0, "errorRate.count")
        }
        if let latency {
            guard latency.minimumMilliseconds.isFinite, latency.maximumMilliseconds.isFinite, latency.minimumMilliseconds >= 0,
                latency.maximumMilliseconds >= latency.minimumMilliseconds, latency.maximumMilliseconds <= 600_000
            else { throw FCMSimulatorError.invalidFaults("latency must satisfy 0 <= minimumMilliseconds <= maximumMilliseconds <= 600000") }
        }
        if let tokenEndpoint {
            guard (400...599).contains(tokenEndpoint.status) else { throw FCMSimulatorError.invalidFaults("tokenEndpoint.status must be 400...599") }
            try FCMSimulatorError.checkProbability(tokenEndpoint.probability, "tokenEndpoint.probability")
            try FCMSimulatorError.check(tokenEndpoint.count, atLeast: 0, "tokenEndpoint.count")
        }
        try FCMSimulatorError.check(accessTokenLifetimeSeconds, in: 1...86_400, "accessTokenLifetimeSeconds")
    }
}

/// An FCM error answer: HTTP status, FCM error code, message and optional `Retry-After`.
public struct FCMSimulatedError: Sendable, Codable, Equatable {
    /// The HTTP status. Defaults by code: `UNREGISTERED` 404, `INVALID_ARGUMENT` 400, `SENDER_ID_MISMATCH` 403,
    /// `QUOTA_EXCEEDED` 429, `UNAVAILABLE` 503, `INTERNAL` 500, `THIRD_PARTY_AUTH_ERROR` 401, others 500.
    public var status: Int
    /// The `errorCode` of the `FcmError` detail (any string; FCM's codes are listed in docs/fcm-simulator.md).
    public var errorCode: String
    /// The `google.rpc.Status` message. Default: FCM's text for the code.
    public var message: String?
    /// Sent as `Retry-After` (seconds), e.g. with `QUOTA_EXCEEDED`.
    public var retryAfterSeconds: Int?

    public init(errorCode: String, status: Int? = nil, message: String? = nil, retryAfterSeconds: Int? = nil) {
        self.errorCode = errorCode
        self.status = status ?? Self.defaultStatus(errorCode)
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// `UNREGISTERED` (404): the app was uninstalled or the token expired.
    public static let unregistered = FCMSimulatedError(errorCode: "UNREGISTERED")
    /// `INVALID_ARGUMENT` (400) on `message.token`.
    public static let invalidToken = FCMSimulatedError(errorCode: "INVALID_ARGUMENT", message: "The registration token is not a valid FCM registration token")
    /// `SENDER_ID_MISMATCH` (403).
    public static let senderIDMismatch = FCMSimulatedError(errorCode: "SENDER_ID_MISMATCH")
    /// `QUOTA_EXCEEDED` (429) with `Retry-After`.
    public static func quotaExceeded(retryAfterSeconds: Int? = nil) -> FCMSimulatedError {
        FCMSimulatedError(errorCode: "QUOTA_EXCEEDED", retryAfterSeconds: retryAfterSeconds)
    }
    /// `UNAVAILABLE` (503).
    public static let unavailable = FCMSimulatedError(errorCode: "UNAVAILABLE")
    /// `INTERNAL` (500).
    public static let `internal` = FCMSimulatedError(errorCode: "INTERNAL")

    static func defaultStatus(_ code: String) -> Int {
        switch code {
        case "UNREGISTERED": 404
        case "INVALID_ARGUMENT": 400
        case "SENDER_ID_MISMATCH": 403
        case "QUOTA_EXCEEDED": 429
        case "UNAVAILABLE": 503
        case "THIRD_PARTY_AUTH_ERROR": 401
        default: 500
        }
    }

    enum CodingKeys: String, CodingKey { case status, errorCode, message, retryAfterSeconds }

    /// Decodes `{"errorCode":"UNREGISTERED"}`; `status`, `message` and `retryAfterSeconds` are optional.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let code = try c.decode(String.self, forKey: .errorCode)
        self.init(
            errorCode: code, status: try c.decodeIfPresent(Int.self, forKey: .status),
            message: try c.decodeIfPresent(String.self, forKey: .message),
            retryAfterSeconds: try c.decodeIfPresent(Int.self, forKey: .retryAfterSeconds))
    }

    func validate(_ field: String) throws {
        guard (400...599).contains(status) else { throw FCMSimulatorError.invalidFaults("\(field): status must be 400...599") }
        guard !errorCode.isEmpty, errorCode.utf8.count <= 64 else { throw FCMSimulatorError.invalidFaults("\(field): errorCode must be 1...64 characters") }
        try FCMSimulatorError.check(retryAfterSeconds, in: 0...86_400, "\(field): retryAfterSeconds")
    }
}

/// Errors for messages that would otherwise be accepted.
public struct FCMErrorInjection: Sendable, Codable, Equatable {
    /// The answer.
    public var error: FCMSimulatedError
    /// Probability in `0...1` that a message gets the error. Default 1.
    public var probability: Double
    /// Only the next `count` messages that qualify get it (a burst); `nil` = no limit.
    public var count: Int?
    /// Start of the window (`nil` = already active).
    public var startsAt: Date?
    /// End of the window (`nil` = never ends).
    public var endsAt: Date?

    public init(error: FCMSimulatedError, probability: Double = 1, count: Int? = nil, startsAt: Date? = nil, endsAt: Date? = nil) {
        self.error = error
        self.probability = probability
        self.count = count
        self.startsAt = startsAt
        self.endsAt = endsAt
    }

    enum CodingKeys: String, CodingKey { case error, probability, count, startsAt, endsAt }

    /// Decodes; only `error` is required.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            error: try c.decode(FCMSimulatedError.self, forKey: .error),
            probability: try c.decodeIfPresent(Double.self, forKey: .probability) ?? 1,
            count: try c.decodeIfPresent(Int.self, forKey: .count),
            startsAt: try c.decodeIfPresent(Date.self, forKey: .startsAt),
            endsAt: try c.decodeIfPresent(Date.self, forKey: .endsAt))
    }

    func isActive(at now: Date) -> Bool {
        if let startsAt, now < startsAt { return false }
        if let endsAt, now >= endsAt { return false }
        return count.map { $0 > 0 } ?? true
    }
}

/// A uniform answer delay.
public struct FCMLatency: Sendable, Codable, Equatable {
    public var minimumMilliseconds: Double
    public var maximumMilliseconds: Double

    public init(minimumMilliseconds: Double, maximumMilliseconds: Double) {
        self.minimumMilliseconds = minimumMilliseconds
        self.maximumMilliseconds = maximumMilliseconds
    }

    func sample() -> Duration {
        let ms = maximumMilliseconds > minimumMilliseconds ? Double.random(in: minimumMilliseconds...maximumMilliseconds) : minimumMilliseconds
        return .microseconds(Int64(ms * 1000))
    }
}

/// Failures of the token endpoint: an OAuth error answer instead of a token.
public struct FCMTokenEndpointFault: Sendable, Codable, Equatable {
    /// The HTTP status (503: unavailable, the client retries; 400: `invalid_grant`, refused credentials).
    public var status: Int
    /// The OAuth `error`. Default: `invalid_grant` for 400/401, `temporarily_unavailable` otherwise.
    public var error: String?
    /// Probability in `0...1` a token request fails. Default 1.
    public var probability: Double
    /// Only the next `count` token requests fail; `nil` = no limit.
    public var count: Int?

    public init(status: Int, error: String? = nil, probability: Double = 1, count: Int? = nil) {
        self.status = status
        self.error = error
        self.probability = probability
        self.count = count
    }

    var oauthError: String { error ?? ((status == 400 || status == 401) ? "invalid_grant" : "temporarily_unavailable") }

    enum CodingKeys: String, CodingKey { case status, error, probability, count }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            status: try c.decode(Int.self, forKey: .status), error: try c.decodeIfPresent(String.self, forKey: .error),
            probability: try c.decodeIfPresent(Double.self, forKey: .probability) ?? 1,
            count: try c.decodeIfPresent(Int.self, forKey: .count))
    }
}
