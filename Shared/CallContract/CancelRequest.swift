import Foundation

/// "Stop ringing this call": every pending or retrying delivery of the call ends `cancelled`.
/// It never sends a push (Apple: the app learns of a cancelled call over its own connection).
public struct CancelRequest: Sendable, Hashable, Codable {
    public var callId: String
    public var requestedAt: Date
    /// Optional free text for support ("rider cancelled").
    public var reason: String?
    /// The dispatch tenant that cancels its own call; absent: every ring of the call (events from
    /// producers without tenants).
    public var tenant: String?

    public init(callId: String, requestedAt: Date, reason: String? = nil, tenant: String? = nil) {
        self.callId = callId
        self.requestedAt = requestedAt
        self.reason = reason
        self.tenant = tenant
    }

    enum CodingKeys: String, CodingKey { case type, callId, requestedAt, reason, tenant }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.callId = try c.requiredCallID(.callId)
        self.requestedAt = try c.requiredTimestamp(.requestedAt)
        self.reason = try c.optionalString(.reason, maxBytes: ContractLimits.cancelReasonBytes, allowEmpty: true)
        self.tenant = try c.optionalTenant(.tenant)
    }

    /// The key a worker remembers this cancel under (see ``CallRequest/cancelScope(callId:tenant:)``).
    public var scope: String { CallRequest.cancelScope(callId: callId, tenant: tenant) }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode("cancel", forKey: .type)
        try c.encode(callId, forKey: .callId)
        try c.encode(ContractCoding.format(requestedAt), forKey: .requestedAt)
        try c.encodeIfPresent(reason, forKey: .reason)
        try c.encodeIfPresent(tenant, forKey: .tenant)
    }

    /// `encode(to:)`'s members in sorted order, through the contract's writer.
    func write(to json: inout ContractJSONWriter) {
        json.member("callId", callId)
        if let reason { json.member("reason", reason) }
        json.member("requestedAt", requestedAt)
        if let tenant { json.member("tenant", tenant) }
        json.member("type", "cancel")
    }
}
