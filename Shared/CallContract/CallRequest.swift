import Foundation

/// An event on `voip.call-requests`, keyed by `callId`: `ring` one device, or `cancel` a call.
public enum CallRequest: Sendable, Hashable {
    case ring(RingRequest)
    case cancel(CancelRequest)

    /// The event types of contract v1.
    public enum EventType: String, Sendable, CaseIterable {
        case ring
        case cancel
    }

    public var callId: String {
        switch self {
        case .ring(let ring): ring.callId
        case .cancel(let cancel): cancel.callId
        }
    }

    public var type: EventType {
        switch self {
        case .ring: .ring
        case .cancel: .cancel
        }
    }

    /// The key under which a worker remembers a cancel and checks a ring: `<tenant>/<callId>` for
    /// events of a tenant, the bare callId otherwise. A ring is cancelled by a cancel of its own
    /// scope or by one without a tenant (producers that predate tenants cancel every ring of the call).
    public static func cancelScope(callId: String, tenant: String?) -> String {
        guard let tenant else { return callId }
        return tenant + "/" + callId
    }

    /// Decodes and validates an event. The error names the first failing field by JSON path.
    public static func decode(_ data: Data) throws(ContractError) -> CallRequest {
        if let ring = fastRing(data) { return .ring(ring) }
        return try ContractCoding.decode(CallRequest.self, from: data)
    }

    /// `decode(_:)` of an event's bytes as Kafka hands them over: read where they are, copied into
    /// `Data` only for `JSONDecoder`.
    public static func decode(_ bytes: [UInt8]) throws(ContractError) -> CallRequest {
        if let ring = bytes.withUnsafeBytes({ RingRequest.fast(bytes: $0) }) { return .ring(ring) }
        return try ContractCoding.decode(CallRequest.self, from: Data(bytes))
    }

    /// The ring of a document in ``FastJSON``'s subset that passes every rule, or nil (then only
    /// the `JSONDecoder` path decides). Must agree with it: `FastJSONTests`, `EventDecoder` fuzz.
    static func fastRing(_ data: Data) -> RingRequest? {
        RingRequest.fast(data)
    }

    /// The event's JSON bytes (sorted keys, contract field names).
    public func encoded() throws -> Data {
        var json = ContractJSONWriter()
        json.object { json in
            switch self {
            case .ring(let ring): ring.write(to: &json)
            case .cancel(let cancel): cancel.write(to: &json)
            }
        }
        return json.data
    }
}

extension CallRequest: Codable {
    enum TypeKey: String, CodingKey { case type }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: TypeKey.self)
        let type = try c.requiredString(.type, maxBytes: ContractLimits.eventTypeBytes)
        switch EventType(rawValue: type) {
        case .ring: self = .ring(try RingRequest(from: decoder))
        case .cancel: self = .cancel(try CancelRequest(from: decoder))
        case nil:
            throw ContractError(.unknownType, path: "type", "unknown event type \"\(type.prefix(32))\" (expected \"ring\" or \"cancel\")")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .ring(let ring): try ring.encode(to: encoder)
        case .cancel(let cancel): try cancel.encode(to: encoder)
        }
    }
}
