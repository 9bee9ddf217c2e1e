import Foundation

/// "Ring this device for this call": one device per event (dispatch fans a multi-device call out).
public struct RingRequest: Sendable, Hashable, Codable {
    public var callId: String
    /// Names an entry of the worker's app configuration (bundle id and credentials).
    public var app: String
    public var device: Device
    public var caller: Caller
    public var hasVideo: Bool
    public var requestedAt: Date
    /// After this instant the call must not ring: no push is sent, the delivery ends `expired`.
    public var ringDeadline: Date
    public var maxDurationSeconds: Int?
    /// Opaque strings the app needs to connect the call (ride id, room, …).
    public var attributes: [String: String]
    /// Replay generation: 0 for the original, incremented by each `callpush replay`.
    public var replay: Int
    /// The dispatch tenant that owns the call (absent on events from producers without tenants).
    /// Statuses copy it, and a `cancel` applies to the rings of its own tenant (see `cancelScope`).
    public var tenant: String?

    /// Limits the decoder enforces.
    public typealias Limits = ContractLimits

    public init(
        callId: String, app: String, device: Device, caller: Caller, hasVideo: Bool = false,
        requestedAt: Date, ringDeadline: Date, maxDurationSeconds: Int? = nil,
        attributes: [String: String] = [:], replay: Int = 0, tenant: String? = nil
    ) {
        self.callId = callId
        self.app = app
        self.device = device
        self.caller = caller
        self.hasVideo = hasVideo
        self.requestedAt = requestedAt
        self.ringDeadline = ringDeadline
        self.maxDurationSeconds = maxDurationSeconds
        self.attributes = attributes
        self.replay = replay
        self.tenant = tenant
    }

    enum CodingKeys: String, CodingKey {
        case type, callId, app, device, caller, hasVideo, requestedAt, ringDeadline
        case maxDurationSeconds, attributes, replay, tenant
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.callId = try c.requiredCallID(.callId)
        let app = try c.requiredString(.app, maxBytes: Limits.appNameBytes)
        guard app.utf8.allSatisfy(\.isAppNameCharacter) else {
            throw c.invalid(.app, "only letters, digits, '.', '-' and '_' are allowed")
        }
        self.app = app
        guard c.contains(.device) else { throw ContractError(.missingField, path: c.path(.device), "missing") }
        self.device = try c.decode(Device.self, forKey: .device)
        guard c.contains(.caller) else { throw ContractError(.missingField, path: c.path(.caller), "missing") }
        self.caller = try c.decode(Caller.self, forKey: .caller)
        self.hasVideo = try c.decodeIfPresent(Bool.self, forKey: .hasVideo) ?? false
        self.requestedAt = try c.requiredTimestamp(.requestedAt)
        self.ringDeadline = try c.requiredTimestamp(.ringDeadline)
        guard ringDeadline > requestedAt else {
            throw c.invalid(.ringDeadline, "must be later than requestedAt")
        }
        self.maxDurationSeconds = try c.optionalInt(.maxDurationSeconds, in: Limits.maxDurationSeconds)
        self.attributes = try Self.decodeAttributes(c)
        self.replay = try c.optionalInt(.replay, in: Limits.replay) ?? 0
        self.tenant = try c.optionalTenant(.tenant)
    }

    private static func decodeAttributes(_ c: KeyedDecodingContainer<CodingKeys>) throws -> [String: String] {
        guard let attributes = try c.decodeIfPresent([String: String].self, forKey: .attributes) else { return [:] }
        if let problem = attributesProblem(attributes, path: c.path(.attributes)) { throw problem }
        return attributes
    }

    /// The first attribute rule `attributes` breaks (count, key and value sizes), or nil.
    static func attributesProblem(_ attributes: [String: String], path: String) -> ContractError? {
        guard attributes.count <= Limits.attributeCount else {
            return ContractError(.invalidValue, path: path, "more than \(Limits.attributeCount) entries")
        }
        func problem(_ key: String, _ value: String) -> ContractError? {
            if key.isEmpty || key.utf8.count > Limits.attributeKeyBytes {
                return ContractError(.invalidValue, path: path, "keys must be 1 to \(Limits.attributeKeyBytes) bytes")
            }
            if value.utf8.count > Limits.attributeValueBytes {
                return ContractError(.invalidValue, path: "\(path).\(key.prefix(Limits.attributeKeyBytes))",
                                     "longer than \(Limits.attributeValueBytes) bytes")
            }
            return nil
        }
        // Sorted only when one breaks a rule, to name the first in key order (most events break none).
        guard attributes.contains(where: { problem($0.key, $0.value) != nil }) else { return nil }
        return attributes.sorted(by: { $0.key < $1.key }).lazy.compactMap { problem($0.key, $0.value) }.first
    }

    /// Applies the decoder's rules for the event's own fields to a value built in code (dispatch
    /// builds events from a request whose device and caller already passed their decoders):
    /// call id, app name, deadline after `requestedAt`, maximum duration, attributes, the device's
    /// platform and environment going together, replay.
    /// A value that passes encodes to an event ``CallRequest/decode(_:)`` accepts as equal.
    public func validate() throws(ContractError) {
        guard CallID.normalize(callId) == callId else { throw ContractError(.invalidValue, path: "callId", "not a UUID") }
        if app.isEmpty { throw ContractError(.invalidValue, path: "app", "must not be empty") }
        if app.utf8.count > Limits.appNameBytes {
            throw ContractError(.invalidValue, path: "app", "longer than \(Limits.appNameBytes) bytes")
        }
        guard app.utf8.allSatisfy(\.isAppNameCharacter) else {
            throw ContractError(.invalidValue, path: "app", "only letters, digits, '.', '-' and '_' are allowed")
        }
        guard ContractCoding.truncatedToMilliseconds(requestedAt) == requestedAt,
              ContractCoding.truncatedToMilliseconds(ringDeadline) == ringDeadline else {
            throw ContractError(.invalidValue, path: "requestedAt", "timestamps carry whole milliseconds")
        }
        guard ringDeadline > requestedAt else {
            throw ContractError(.invalidValue, path: "ringDeadline", "must be later than requestedAt")
        }
        if let maxDurationSeconds, !Limits.maxDurationSeconds.contains(maxDurationSeconds) {
            throw ContractError(.invalidValue, path: "maxDurationSeconds",
                                "must be between \(Limits.maxDurationSeconds.lowerBound) and \(Limits.maxDurationSeconds.upperBound)")
        }
        if let problem = Self.attributesProblem(attributes, path: "attributes") { throw problem }
        if let (field, problem) = device.consistencyProblem { throw ContractError(.invalidValue, path: "device.\(field)", problem) }
        guard Limits.replay.contains(replay) else {
            throw ContractError(.invalidValue, path: "replay", "must be between \(Limits.replay.lowerBound) and \(Limits.replay.upperBound)")
        }
        if let tenant, let problem = TenantName.problem(tenant) { throw ContractError(.invalidValue, path: "tenant", problem) }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode("ring", forKey: .type)
        try c.encode(callId, forKey: .callId)
        try c.encode(app, forKey: .app)
        try c.encode(device, forKey: .device)
        try c.encode(caller, forKey: .caller)
        try c.encode(hasVideo, forKey: .hasVideo)
        try c.encode(ContractCoding.format(requestedAt), forKey: .requestedAt)
        try c.encode(ContractCoding.format(ringDeadline), forKey: .ringDeadline)
        try c.encodeIfPresent(maxDurationSeconds, forKey: .maxDurationSeconds)
        try c.encode(attributes, forKey: .attributes)
        try c.encode(replay, forKey: .replay)
        try c.encodeIfPresent(tenant, forKey: .tenant)
    }

    /// `encode(to:)`'s members in sorted order, through the contract's writer.
    func write(to json: inout ContractJSONWriter) {
        json.member("app", app)
        json.member("attributes", attributes)
        json.member("callId", callId)
        json.member("caller") { caller.write(to: &$0) }
        json.member("device") { device.write(to: &$0) }
        json.member("hasVideo", hasVideo)
        if let maxDurationSeconds { json.member("maxDurationSeconds", maxDurationSeconds) }
        json.member("replay", replay)
        json.member("requestedAt", requestedAt)
        json.member("ringDeadline", ringDeadline)
        if let tenant { json.member("tenant", tenant) }
        json.member("type", "ring")
    }

    /// The key a worker remembers a cancel under: a `cancel` with a tenant stops only that
    /// tenant's rings of the call (two tenants may use one callId); see ``CallRequest/cancelScope(callId:tenant:)``.
    public var cancelScope: String { CallRequest.cancelScope(callId: callId, tenant: tenant) }

    /// Whether the ring deadline has passed at `now`.
    public func isExpired(at now: Date) -> Bool { now >= ringDeadline }
}
