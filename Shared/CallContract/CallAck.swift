import Foundation

/// What the app POSTs to dispatch (`/v1/calls/{callId}/ack`) after handling a VoIP push.
public struct CallAck: Sendable, Hashable, Codable {
    public enum Outcome: String, Sendable, Hashable, Codable, CaseIterable {
        /// `reportNewIncomingCall` succeeded: the call UI showed.
        case reported
        /// `reportNewIncomingCall` failed (Do Not Disturb / Focus, blocked caller, …).
        case suppressed
    }

    /// From the payload: which delivery this ack is for.
    public var deviceKey: String
    /// From the payload: proves the ack comes from the device that got the push.
    public var ackToken: String
    public var outcome: Outcome
    /// With `suppressed`: the CallKit error (`code` e.g. `filteredByDoNotDisturb`, `domain`
    /// `com.apple.CallKit.error.incomingcall`).
    public var error: CallStatus.ErrorInfo?

    public init(deviceKey: String, ackToken: String, outcome: Outcome, error: CallStatus.ErrorInfo? = nil) {
        self.deviceKey = deviceKey
        self.ackToken = ackToken
        self.outcome = outcome
        self.error = error
    }

    enum CodingKeys: String, CodingKey { case deviceKey, ackToken, outcome, error }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.deviceKey = try c.requiredString(.deviceKey, maxBytes: 64)
        self.ackToken = try c.requiredString(.ackToken, maxBytes: 128)
        self.outcome = try c.requiredEnum(Outcome.self, .outcome)
        self.error = try c.decodeIfPresent(CallStatus.ErrorInfo.self, forKey: .error)
        if outcome == .suppressed, error == nil {
            throw ContractError(.missingField, path: c.path(.error), "required when outcome is \"suppressed\"")
        }
    }

    public static func decode(_ data: Data) throws(ContractError) -> CallAck {
        try ContractCoding.decode(CallAck.self, from: data)
    }
}
