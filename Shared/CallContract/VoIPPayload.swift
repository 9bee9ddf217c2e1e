import Foundation

/// What the iOS app receives in `PKPushPayload.dictionaryPayload` for a ringing call.
///
/// The app must call `reportNewIncomingCall` with `UUID(uuidString: callId)` before the PushKit
/// handler returns, then POST a `CallAck` carrying `deviceKey` and `ackToken` to dispatch.
public struct VoIPPayload: Sendable, Hashable, Codable {
    /// Apple's limit for VoIP payloads.
    public static let maxBytes = 5120

    public var callId: String
    /// Identifies this device's delivery in the ack (a hash of the token, not the token).
    public var deviceKey: String
    public var handle: String
    public var handleType: Caller.HandleType
    public var displayName: String?
    public var hasVideo: Bool
    /// The app should not show a call that arrives after this instant (pushes can arrive late).
    public var ringDeadline: Date
    public var maxDurationSeconds: Int?
    public var attributes: [String: String]
    /// HMAC over callId and deviceKey, returned with the ack; proves the ack comes from the pushed device.
    public var ackToken: String

    /// Characters of the ack token the worker signs (`AckTokenSigner`, version 2): the payload size
    /// checks count them before a token exists.
    public static let ackTokenLength = 58
    public var replay: Int

    public init(ring: RingRequest, deviceKey: String, ackToken: String) {
        self.callId = ring.callId
        self.deviceKey = deviceKey
        self.handle = ring.caller.handle
        self.handleType = ring.caller.handleType
        self.displayName = ring.caller.displayName
        self.hasVideo = ring.hasVideo
        self.ringDeadline = ring.ringDeadline
        self.maxDurationSeconds = ring.maxDurationSeconds
        self.attributes = ring.attributes
        self.ackToken = ackToken
        self.replay = ring.replay
    }

    enum CodingKeys: String, CodingKey {
        case callId, deviceKey, handle, handleType, displayName, hasVideo, ringDeadline
        case maxDurationSeconds, attributes, ackToken, replay
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.callId = try c.requiredCallID(.callId)
        self.deviceKey = try c.requiredString(.deviceKey, maxBytes: ContractLimits.deviceKeyBytes)
        self.handle = try c.requiredString(.handle, maxBytes: ContractLimits.handleBytes)
        self.handleType = try c.optionalEnum(Caller.HandleType.self, .handleType) ?? .generic
        self.displayName = try c.optionalString(.displayName, maxBytes: ContractLimits.displayNameBytes)
        self.hasVideo = try c.decodeIfPresent(Bool.self, forKey: .hasVideo) ?? false
        self.ringDeadline = try c.requiredTimestamp(.ringDeadline)
        self.maxDurationSeconds = try c.optionalInt(.maxDurationSeconds, in: ContractLimits.maxDurationSeconds)
        self.attributes = try c.decodeIfPresent([String: String].self, forKey: .attributes) ?? [:]
        self.ackToken = try c.requiredString(.ackToken, maxBytes: ContractLimits.ackTokenBytes)
        self.replay = try c.optionalInt(.replay, in: ContractLimits.replay) ?? 0
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(callId, forKey: .callId)
        try c.encode(deviceKey, forKey: .deviceKey)
        try c.encode(handle, forKey: .handle)
        try c.encode(handleType, forKey: .handleType)
        try c.encodeIfPresent(displayName, forKey: .displayName)
        try c.encode(hasVideo, forKey: .hasVideo)
        try c.encode(ContractCoding.format(ringDeadline), forKey: .ringDeadline)
        try c.encodeIfPresent(maxDurationSeconds, forKey: .maxDurationSeconds)
        try c.encode(attributes, forKey: .attributes)
        try c.encode(ackToken, forKey: .ackToken)
        try c.encode(replay, forKey: .replay)
    }

    /// The payload bytes, refused with `.payloadTooLarge` when over Apple's 5120-byte VoIP limit.
    public func encoded() throws(ContractError) -> Data {
        var json = ContractJSONWriter(capacity: 512)
        json.object { json in
            json.member("ackToken", ackToken)
            json.member("attributes", attributes)
            json.member("callId", callId)
            json.member("deviceKey", deviceKey)
            if let displayName { json.member("displayName", displayName) }
            json.member("handle", handle)
            json.member("handleType", handleType.rawValue)
            json.member("hasVideo", hasVideo)
            if let maxDurationSeconds { json.member("maxDurationSeconds", maxDurationSeconds) }
            json.member("replay", replay)
            json.member("ringDeadline", ringDeadline)
        }
        guard json.bytes.count <= Self.maxBytes else {
            throw ContractError(.payloadTooLarge, path: "attributes",
                                "VoIP payload would be \(json.bytes.count) bytes (limit \(Self.maxBytes))")
        }
        return json.data
    }

    /// Decodes a payload (on the device: `JSONSerialization.data(withJSONObject: payload.dictionaryPayload)`).
    public static func decode(_ data: Data) throws(ContractError) -> VoIPPayload {
        try ContractCoding.decode(VoIPPayload.self, from: data)
    }
}
