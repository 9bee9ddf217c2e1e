import Foundation

/// Faults the simulator injects. Settable at start (``APNSSimulatorConfiguration/faults``) and at run time
/// (``APNsSimulator/setFaults(_:)`` or `PUT /admin/faults`). Every property defaults to "no fault".
///
/// Stream counts are per connection: with `goAwayAfterStreams = 3`, streams 1–3 of every connection are
/// answered normally and the connection then sends GOAWAY (last-stream-id = the third stream).
public struct APNSSimulatorFaults: Sendable, Codable, Equatable {
    /// Device token (hex, compared case-insensitively) → the answer every push to it gets.
    public var tokenOutcomes: [String: TokenOutcome] = [:]
    /// Delay before each response is written.
    public var latency: LatencyDistribution? = nil
    /// Random or time-windowed error answers (429 / 500 / 503) for pushes that would otherwise succeed.
    public var errorRate: ErrorInjection? = nil
    /// Send GOAWAY (NO_ERROR, debug data `{"reason":"<goAwayReason>"}`) once a connection has received this
    /// many streams; those streams are still answered, later ones are not processed. Then the connection
    /// closes when its last stream finished.
    public var goAwayAfterStreams: Int? = nil
    /// The reason put in the GOAWAY debug data. Default `"Shutdown"`.
    public var goAwayReason: String = "Shutdown"
    /// Close the TCP connection abruptly (no GOAWAY, no answers) when a connection receives its stream number
    /// N + 1: N streams are answered, the stream that crosses the limit and everything in flight is lost.
    public var dropConnectionAfterStreams: Int? = nil
    /// Overrides ``APNSSimulatorConfiguration/maxConcurrentStreams``; applied to open connections too (a new
    /// SETTINGS frame).
    public var maxConcurrentStreams: Int? = nil
    /// Answer the first stream of every connection with GOAWAY (last-stream-id 0, NO_ERROR, debug data
    /// `{"reason":"<this>"}`) and close it: nothing on the connection is processed. This is how APNs turns away
    /// a certificate for the other environment (`BadCertificateEnvironment`).
    public var rejectConnections: String? = nil
    /// Reset this fraction (0…1, at random) of new streams with REFUSED_STREAM before processing them: a server
    /// refusing bursts of streams. Refused streams are safe for the client to retry.
    public var refusedStreamRate: Double = 0
    /// Accept every stream and never answer it (for client timeout tests).
    public var noResponse: Bool = false
    /// Stop reading from every connection (open ones and new ones): nothing is answered, not even PINGs,
    /// like a hung server or a black-holed path. Clients must notice through their PING health checks.
    public var unresponsive: Bool = false

    /// Creates an empty fault set (no fault).
    public init(
        tokenOutcomes: [String: TokenOutcome] = [:],
        latency: LatencyDistribution? = nil,
        errorRate: ErrorInjection? = nil,
        goAwayAfterStreams: Int? = nil,
        goAwayReason: String = "Shutdown",
        dropConnectionAfterStreams: Int? = nil,
        maxConcurrentStreams: Int? = nil,
        rejectConnections: String? = nil,
        refusedStreamRate: Double = 0,
        noResponse: Bool = false,
        unresponsive: Bool = false
    ) {
        self.tokenOutcomes = tokenOutcomes
        self.latency = latency
        self.errorRate = errorRate
        self.goAwayAfterStreams = goAwayAfterStreams
        self.goAwayReason = goAwayReason
        self.dropConnectionAfterStreams = dropConnectionAfterStreams
        self.maxConcurrentStreams = maxConcurrentStreams
        self.rejectConnections = rejectConnections
        self.refusedStreamRate = refusedStreamRate
        self.noResponse = noResponse
        self.unresponsive = unresponsive
    }

    enum CodingKeys: String, CodingKey {
        case tokenOutcomes, latency, errorRate, goAwayAfterStreams, goAwayReason
        case dropConnectionAfterStreams, maxConcurrentStreams, rejectConnections, refusedStreamRate, noResponse, unresponsive
    }

    /// Decodes faults from JSON; every key is optional.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.tokenOutcomes = try c.decodeIfPresent([String: TokenOutcome].self, forKey: .tokenOutcomes) ?? [:]
        self.latency = try c.decodeIfPresent(LatencyDistribution.self, forKey: .latency)
        self.errorRate = try c.decodeIfPresent(ErrorInjection.self, forKey: .errorRate)
        self.goAwayAfterStreams = try c.decodeIfPresent(Int.self, forKey: .goAwayAfterStreams)
        self.goAwayReason = try c.decodeIfPresent(String.self, forKey: .goAwayReason) ?? "Shutdown"
        self.dropConnectionAfterStreams = try c.decodeIfPresent(Int.self, forKey: .dropConnectionAfterStreams)
        self.maxConcurrentStreams = try c.decodeIfPresent(Int.self, forKey: .maxConcurrentStreams)
        self.rejectConnections = try c.decodeIfPresent(String.self, forKey: .rejectConnections)
        self.refusedStreamRate = try c.decodeIfPresent(Double.self, forKey: .refusedStreamRate) ?? 0
        self.noResponse = try c.decodeIfPresent(Bool.self, forKey: .noResponse) ?? false
        self.unresponsive = try c.decodeIfPresent(Bool.self, forKey: .unresponsive) ?? false
    }

    /// Checks the values are usable; throws an ``APNSSimulatorError`` naming the bad field.
    public func validate() throws {
        try APNSSimulatorError.check(goAwayAfterStreams, atLeast: 1, "goAwayAfterStreams")
        try APNSSimulatorError.check(dropConnectionAfterStreams, atLeast: 1, "dropConnectionAfterStreams")
        try APNSSimulatorError.check(maxConcurrentStreams, in: 1...Int(Int32.max), "maxConcurrentStreams")
        try APNSSimulatorError.checkProbability(refusedStreamRate, "refusedStreamRate")
        if let rejectConnections, rejectConnections.isEmpty || rejectConnections.utf8.count > 200 {
            throw APNSSimulatorError.invalidFaults("rejectConnections must be a reason of 1...200 bytes")
        }
        if let latency { try latency.validate() }
        if let errorRate { try errorRate.validate() }
        for (token, outcome) in tokenOutcomes {
            guard DeviceToken.isValid(token) else {
                throw APNSSimulatorError.invalidFaults("tokenOutcomes: '\(DeviceToken.redacted(token))' is not a hex token")
            }
            try outcome.validate()
        }
    }

    /// The same faults with token keys lowercased (tokens compare case-insensitively).
    var normalized: APNSSimulatorFaults {
        var copy = self
        copy.tokenOutcomes = Dictionary(
            tokenOutcomes.map { ($0.key.lowercased(), $0.value) },
            uniquingKeysWith: { _, last in last }
        )
        return copy
    }
}

/// The answer every push to one device token gets.
public struct TokenOutcome: Sendable, Codable, Equatable {
    /// The `:status`, e.g. 410.
    public var status: Int
    /// The `reason` in the JSON body.
    public var reason: String
    /// For 410: when the token stopped being valid (sent as `timestamp`, ms). `nil` = the time of the request.
    public var timestamp: Date?
    /// Never answer pushes to this token (the stream stays open until the client gives up).
    public var noResponse: Bool

    /// Creates an outcome.
    public init(status: Int, reason: String, timestamp: Date? = nil, noResponse: Bool = false) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
        self.noResponse = noResponse
    }

    /// 410 `Unregistered`, with the time the token became invalid (`nil` = now).
    public static func unregistered(timestamp: Date? = nil) -> TokenOutcome {
        TokenOutcome(status: 410, reason: "Unregistered", timestamp: timestamp)
    }
    /// 410 `ExpiredToken`.
    public static let expiredToken = TokenOutcome(status: 410, reason: "ExpiredToken")
    /// 400 `BadDeviceToken`.
    public static let badDeviceToken = TokenOutcome(status: 400, reason: "BadDeviceToken")
    /// 400 `DeviceTokenNotForTopic`.
    public static let deviceTokenNotForTopic = TokenOutcome(status: 400, reason: "DeviceTokenNotForTopic")
    /// 429 `TooManyRequests` (too many pushes to this device).
    public static let tooManyRequests = TokenOutcome(status: 429, reason: "TooManyRequests")
    /// Accept pushes to this token and never answer.
    public static let noResponse = TokenOutcome(status: 0, reason: "", noResponse: true)
    /// Any status and reason.
    public static func status(_ status: Int, reason: String) -> TokenOutcome {
        TokenOutcome(status: status, reason: reason)
    }

    enum CodingKeys: String, CodingKey { case status, reason, timestamp, noResponse }

    /// Decodes `{"status":410,"reason":"Unregistered","timestamp":<ms>}` or `{"noResponse":true}`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.noResponse = try c.decodeIfPresent(Bool.self, forKey: .noResponse) ?? false
        self.status = try c.decodeIfPresent(Int.self, forKey: .status) ?? (noResponse ? 0 : 410)
        self.reason = try c.decodeIfPresent(String.self, forKey: .reason) ?? (noResponse ? "" : "Unregistered")
        if let ms = try c.decodeIfPresent(Int64.self, forKey: .timestamp) {
            self.timestamp = Date(timeIntervalSince1970: Double(ms) / 1000)
        } else {
            self.timestamp = nil
        }
    }

    /// Encodes the timestamp as milliseconds since 1970, like APNs.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(status, forKey: .status)
        try c.encode(reason, forKey: .reason)
        if let timestamp { try c.encode(Int64(timestamp.timeIntervalSince1970 * 1000), forKey: .timestamp) }
        if noResponse { try c.encode(true, forKey: .noResponse) }
    }

    func validate() throws {
        if !noResponse && !(200...599).contains(status) {
            throw APNSSimulatorError.invalidFaults("tokenOutcomes: status \(status) is not an HTTP status")
        }
    }
}

extension APNSSimulatorFaults {
    /// The same faults with out-of-range values brought into range.
    var clamped: APNSSimulatorFaults {
        var copy = self
        copy.goAwayAfterStreams = goAwayAfterStreams.map { max(1, $0) }
        copy.dropConnectionAfterStreams = dropConnectionAfterStreams.map { max(1, $0) }
        copy.maxConcurrentStreams = maxConcurrentStreams.map { min(max(1, $0), Int(Int32.max)) }
        if var latency = copy.latency {
            latency.minimumMilliseconds = min(max(0, latency.minimumMilliseconds.isFinite ? latency.minimumMilliseconds : 0), 600_000)
            latency.maximumMilliseconds = min(max(latency.minimumMilliseconds, latency.maximumMilliseconds.isFinite ? latency.maximumMilliseconds : 0), 600_000)
            copy.latency = latency
        }
        copy.refusedStreamRate = refusedStreamRate.isFinite ? min(max(0, refusedStreamRate), 1) : 0
        if var errorRate = copy.errorRate {
            errorRate.probability = errorRate.probability.isFinite ? min(max(0, errorRate.probability), 1) : 0
            copy.errorRate = errorRate
        }
        return copy
    }
}
