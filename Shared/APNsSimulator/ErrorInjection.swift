import Foundation

/// Answers pushes that would succeed with an error status, with a probability and optionally only inside a
/// time window (compared with the simulator's clock).
public struct ErrorInjection: Sendable, Codable, Equatable {
    /// The `:status`: typically 429, 500 or 503.
    public var status: Int
    /// The `reason`. Defaults by status: 429 `TooManyRequests`, 500 `InternalServerError`,
    /// 503 `ServiceUnavailable`, others `InternalServerError`.
    public var reason: String
    /// Probability in `0...1` that a push gets the error. 1 = every push.
    public var probability: Double
    /// Start of the window (`nil` = already active).
    public var startsAt: Date?
    /// End of the window (`nil` = never ends).
    public var endsAt: Date?

    /// Creates an error injection.
    public init(status: Int, reason: String? = nil, probability: Double, startsAt: Date? = nil, endsAt: Date? = nil) {
        self.status = status
        self.reason = reason ?? ErrorInjection.defaultReason(for: status)
        self.probability = probability
        self.startsAt = startsAt
        self.endsAt = endsAt
    }

    /// The APNs reason that goes with a status.
    public static func defaultReason(for status: Int) -> String {
        switch status {
        case 429: return "TooManyRequests"
        case 503: return "ServiceUnavailable"
        default: return "InternalServerError"
        }
    }

    enum CodingKeys: String, CodingKey { case status, reason, probability, startsAt, endsAt }

    /// Decodes; `reason` and the window bounds are optional.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let status = try c.decode(Int.self, forKey: .status)
        self.status = status
        self.reason = try c.decodeIfPresent(String.self, forKey: .reason) ?? ErrorInjection.defaultReason(for: status)
        self.probability = try c.decodeIfPresent(Double.self, forKey: .probability) ?? 1
        self.startsAt = try c.decodeIfPresent(Date.self, forKey: .startsAt)
        self.endsAt = try c.decodeIfPresent(Date.self, forKey: .endsAt)
    }

    /// Whether the injection applies at `now` (before the coin flip).
    func isActive(at now: Date) -> Bool {
        if let startsAt, now < startsAt { return false }
        if let endsAt, now >= endsAt { return false }
        return true
    }

    func validate() throws {
        guard (400...599).contains(status) else {
            throw APNSSimulatorError.invalidFaults("errorRate.status must be an error status (400...599)")
        }
        try APNSSimulatorError.checkProbability(probability, "errorRate.probability")
    }
}
