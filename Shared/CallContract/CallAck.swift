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
    /// `com.apple.CallKit.error.incomingcall`). Bounded (see ``Limits``) because it comes from a
    /// device and reaches backends; ignored with `reported`.
    public var error: CallStatus.ErrorInfo?

    /// Limits on what a device may send.
    public typealias Limits = ContractLimits

    public init(deviceKey: String, ackToken: String, outcome: Outcome, error: CallStatus.ErrorInfo? = nil) {
        self.deviceKey = deviceKey
        self.ackToken = ackToken
        self.outcome = outcome
        self.error = error
    }

    enum CodingKeys: String, CodingKey { case deviceKey, ackToken, outcome, error }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.deviceKey = try c.requiredString(.deviceKey, maxBytes: ContractLimits.deviceKeyBytes)
        self.ackToken = try c.requiredString(.ackToken, maxBytes: ContractLimits.ackTokenBytes)
        self.outcome = try c.requiredEnum(Outcome.self, .outcome)
        let error = try c.decodeIfPresent(CallStatus.ErrorInfo.self, forKey: .error)
        if let error, let problem = Self.errorProblem(error, path: c.path(.error)) { throw problem }
        // A device that showed the call has no error to report: one sent anyway is not kept.
        self.error = outcome == .reported ? nil : error
        if outcome == .suppressed, error == nil {
            throw ContractError(.missingField, path: c.path(.error), "required when outcome is \"suppressed\"")
        }
    }

    /// The first rule of ``Limits`` that `error` breaks, naming the field (`error.code`), or nil.
    public static func errorProblem(_ error: CallStatus.ErrorInfo, path: String = "error") -> ContractError? {
        func token(_ value: String, _ field: String, maxBytes: Int) -> ContractError? {
            guard !value.isEmpty, value.utf8.count <= maxBytes, value.utf8.allSatisfy(\.isAppNameCharacter) else {
                return ContractError(.invalidValue, path: "\(path).\(field)",
                                     "1 to \(maxBytes) of ASCII letters, digits, '.', '-' and '_'")
            }
            return nil
        }
        if let problem = token(error.code, "code", maxBytes: Limits.errorCodeBytes) { return problem }
        if let domain = error.domain, let problem = token(domain, "domain", maxBytes: Limits.errorDomainBytes) { return problem }
        if let message = error.message {
            if message.utf8.count > Limits.errorMessageBytes {
                return ContractError(.invalidValue, path: "\(path).message", "longer than \(Limits.errorMessageBytes) bytes")
            }
            if message.unicodeScalars.contains(where: { [.control, .format].contains($0.properties.generalCategory) }) {
                return ContractError(.invalidValue, path: "\(path).message", "contains control or format characters")
            }
        }
        return nil
    }

    public static func decode(_ data: Data) throws(ContractError) -> CallAck {
        try ContractCoding.decode(CallAck.self, from: data)
    }
}
