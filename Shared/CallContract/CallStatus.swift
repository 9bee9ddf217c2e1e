import Foundation

/// What happened to one delivery (one device of one call): an event on `voip.call-status`, keyed by `callId`.
public struct CallStatus: Sendable, Hashable, Codable {
    /// The states of a delivery. Terminal worker states end a delivery; `reported` / `suppressed`
    /// come later, from the device through dispatch's ack endpoint.
    public enum State: String, Sendable, Hashable, Codable, CaseIterable {
        /// APNs (or FCM, for an Android device) accepted the push.
        case sent
        /// A retryable outcome; another attempt follows (before the ring deadline).
        case retrying
        /// A permanent outcome (`Unregistered`, `BadDeviceToken`, credentials, …); the event is in the DLQ.
        case failed
        /// The ring deadline passed before a push could be sent; no push goes out after it.
        case expired
        /// A `cancel` arrived before the push went out.
        case cancelled
        /// The same (callId, device, replay) was already handled; no push.
        case duplicate
        /// The event is invalid; it is in the DLQ with the reason.
        case rejected
        /// The app reported the call to CallKit and the call UI showed.
        case reported
        /// The app could not show the call (Focus / Do Not Disturb, blocked caller, …); `error` says why.
        case suppressed

        /// Whether the worker is done with the delivery in this state.
        public var isTerminal: Bool {
            switch self {
            case .retrying: false
            default: true
            }
        }

        /// States that come from the device (via dispatch) rather than from a worker.
        public var isDeviceReport: Bool { self == .reported || self == .suppressed }
    }

    /// What APNs answered to the attempt this status reports.
    public struct APNSDetails: Sendable, Hashable, Codable {
        /// `apns-id` of the request.
        public var id: String?
        /// `apns-unique-id` (sandbox only).
        public var uniqueId: String?
        /// HTTP status, nil when no response arrived (timeout, connection lost).
        public var status: Int?
        /// Apple's reason string, verbatim.
        public var reason: String?
        /// With 410: when APNs learnt the token is no longer valid.
        public var timestamp: Date?

        public init(id: String? = nil, uniqueId: String? = nil, status: Int? = nil, reason: String? = nil, timestamp: Date? = nil) {
            self.id = id
            self.uniqueId = uniqueId
            self.status = status
            self.reason = reason
            self.timestamp = timestamp
        }

        enum CodingKeys: String, CodingKey { case id, uniqueId, status, reason, timestamp }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(uniqueId, forKey: .uniqueId)
            try c.encode(status, forKey: .status)
            try c.encode(reason, forKey: .reason)
            try c.encode(timestamp.map(ContractCoding.format), forKey: .timestamp)
        }
    }

    /// What FCM answered to the attempt this status reports (Android devices; `apns` is then absent).
    public struct FCMDetails: Sendable, Hashable, Codable {
        /// FCM's message name, `projects/<project>/messages/<id>`, when FCM accepted the message.
        public var name: String?
        /// HTTP status, nil when no response arrived (timeout, connection lost, no access token).
        public var status: Int?
        /// FCM's error code verbatim (`UNREGISTERED`, `QUOTA_EXCEEDED`, …), or the client's code
        /// for a failure without an FCM answer (`timeout`, `token-unavailable`, …).
        public var errorCode: String?

        public init(name: String? = nil, status: Int? = nil, errorCode: String? = nil) {
            self.name = name
            self.status = status
            self.errorCode = errorCode
        }

        enum CodingKeys: String, CodingKey { case name, status, errorCode }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            name = try c.optionalString(.name, maxBytes: ContractLimits.fcmMessageNameBytes)
            status = try c.optionalInt(.status, in: ContractLimits.httpStatus)
            errorCode = try c.optionalString(.errorCode, maxBytes: ContractLimits.fcmErrorCodeBytes)
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(name, forKey: .name)
            try c.encode(status, forKey: .status)
            try c.encode(errorCode, forKey: .errorCode)
        }
    }

    /// Why a delivery failed, was rejected, or was suppressed on the device.
    public struct ErrorInfo: Sendable, Hashable, Codable {
        /// Stable machine code: a contract error code, an APNs reason, a CallKit error name.
        public var code: String
        public var message: String?
        /// For device reports: the error domain (e.g. `com.apple.CallKit.error.incomingcall`).
        public var domain: String?

        public init(code: String, message: String? = nil, domain: String? = nil) {
            self.code = code
            self.message = message
            self.domain = domain
        }
    }

    public var callId: String
    /// The backend's device id from the ring request, if it gave one.
    public var deviceId: String?
    /// Stable, non-reversible key of the device token (see `DeviceKey`); absent for rejected events.
    public var deviceKey: String?
    /// The app the call was for, if known.
    public var app: String?
    public var state: State
    /// Attempt number (1-based) the status reports; 0 when no push was attempted.
    public var attempt: Int
    public var replay: Int
    public var at: Date
    /// What APNs answered (iOS devices).
    public var apns: APNSDetails?
    /// What FCM answered (Android devices); absent from statuses of iOS devices.
    public var fcm: FCMDetails?
    public var error: ErrorInfo?
    /// Which worker (or dispatch instance) wrote the status.
    public var worker: String
    /// Whether this is the call-level record of a processed `cancel` (state `cancelled`, no device)
    /// rather than the status of one delivery.
    public var isCancelMarker: Bool { state == .cancelled && deviceKey == nil }

    /// The tenant of the call, copied from its ring event (absent when the ring had none).
    public var tenant: String?

    public init(
        callId: String, deviceId: String? = nil, deviceKey: String? = nil, app: String? = nil,
        state: State, attempt: Int = 0, replay: Int = 0, at: Date, apns: APNSDetails? = nil,
        fcm: FCMDetails? = nil, error: ErrorInfo? = nil, worker: String, tenant: String? = nil
    ) {
        self.callId = callId
        self.deviceId = deviceId
        self.deviceKey = deviceKey
        self.app = app
        self.state = state
        self.attempt = attempt
        self.replay = replay
        self.at = at
        self.apns = apns
        self.fcm = fcm
        self.error = error
        self.worker = worker
        self.tenant = tenant
    }

    enum CodingKeys: String, CodingKey {
        case callId, deviceId, deviceKey, app, state, attempt, replay, at, apns, fcm, error, worker, tenant
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.callId = try c.requiredString(.callId, maxBytes: ContractLimits.statusCallIDBytes)
        self.deviceId = try c.optionalString(.deviceId, maxBytes: ContractLimits.deviceIDBytes)
        self.deviceKey = try c.optionalString(.deviceKey, maxBytes: ContractLimits.deviceKeyBytes)
        self.app = try c.optionalString(.app, maxBytes: ContractLimits.appNameBytes)
        self.state = try c.requiredEnum(State.self, .state)
        self.attempt = try c.optionalInt(.attempt, in: ContractLimits.attempt) ?? 0
        self.replay = try c.optionalInt(.replay, in: ContractLimits.replay) ?? 0
        self.at = try c.requiredTimestamp(.at)
        self.apns = try c.decodeIfPresent(APNSDetails.self, forKey: .apns)
        self.fcm = try c.decodeIfPresent(FCMDetails.self, forKey: .fcm)
        self.error = try c.decodeIfPresent(ErrorInfo.self, forKey: .error)
        self.worker = try c.optionalString(.worker, maxBytes: ContractLimits.workerNameBytes, allowEmpty: true) ?? ""
        self.tenant = try c.optionalTenant(.tenant)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(callId, forKey: .callId)
        try c.encode(deviceId, forKey: .deviceId)
        try c.encode(deviceKey, forKey: .deviceKey)
        try c.encodeIfPresent(app, forKey: .app)
        try c.encode(state, forKey: .state)
        try c.encode(attempt, forKey: .attempt)
        try c.encode(replay, forKey: .replay)
        try c.encode(ContractCoding.format(at), forKey: .at)
        try c.encode(apns, forKey: .apns)
        try c.encodeIfPresent(fcm, forKey: .fcm)
        try c.encode(error, forKey: .error)
        try c.encode(worker, forKey: .worker)
        try c.encodeIfPresent(tenant, forKey: .tenant)
    }

    /// Decodes and validates a status event.
    public static func decode(_ data: Data) throws(ContractError) -> CallStatus {
        if let status = fastStatus(data) { return status }
        return try ContractCoding.decode(CallStatus.self, from: data)
    }

    /// The status of a document in ``FastJSON``'s subset that passes every rule, or nil (then only
    /// the `JSONDecoder` path decides). Must agree with it: `FastJSONTests`, `EventDecoder` fuzz.
    static func fastStatus(_ data: Data) -> CallStatus? {
        FastJSON.parse(data).flatMap(CallStatus.init(fast:))
    }

    /// The status's JSON bytes.
    public func encoded() throws -> Data {
        Data(encodedBytes())
    }

    /// ``encoded()`` as an array, as a Kafka record takes it (no round trip through `Data`).
    public func encodedBytes() -> [UInt8] {
        var json = ContractJSONWriter(capacity: 384)
        json.object { json in
            if let apns {
                json.member("apns") { json in
                    Self.nullable(&json, "id", apns.id) { $0.member("id", $1) }
                    Self.nullable(&json, "reason", apns.reason) { $0.member("reason", $1) }
                    Self.nullable(&json, "status", apns.status) { $0.member("status", $1) }
                    Self.nullable(&json, "timestamp", apns.timestamp) { $0.member("timestamp", $1) }
                    Self.nullable(&json, "uniqueId", apns.uniqueId) { $0.member("uniqueId", $1) }
                }
            } else {
                json.null("apns")
            }
            if let app { json.member("app", app) }
            json.member("at", at)
            json.member("attempt", attempt)
            json.member("callId", callId)
            Self.nullable(&json, "deviceId", deviceId) { $0.member("deviceId", $1) }
            Self.nullable(&json, "deviceKey", deviceKey) { $0.member("deviceKey", $1) }
            if let error {
                json.member("error") { json in
                    json.member("code", error.code)
                    if let domain = error.domain { json.member("domain", domain) }
                    if let message = error.message { json.member("message", message) }
                }
            } else {
                json.null("error")
            }
            if let fcm {
                json.member("fcm") { json in
                    Self.nullable(&json, "errorCode", fcm.errorCode) { $0.member("errorCode", $1) }
                    Self.nullable(&json, "name", fcm.name) { $0.member("name", $1) }
                    Self.nullable(&json, "status", fcm.status) { $0.member("status", $1) }
                }
            }
            json.member("replay", replay)
            json.member("state", state.rawValue)
            if let tenant { json.member("tenant", tenant) }
            json.member("worker", worker)
        }
        return json.bytes
    }

    /// `value`'s member, or `"key":null` (as `encode(to:)` writes absent optionals here).
    private static func nullable<T>(_ json: inout ContractJSONWriter, _ key: StaticString, _ value: T?,
                                    _ write: (inout ContractJSONWriter, T) -> Void) {
        if let value { write(&json, value) } else { json.null(key) }
    }
}
