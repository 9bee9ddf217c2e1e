import Foundation

/// Who is calling, as CallKit shows it (`CXHandle` type and value, localized caller name).
public struct Caller: Sendable, Hashable, Codable {
    /// CallKit's `CXHandle.HandleType`.
    public enum HandleType: String, Sendable, Hashable, Codable, CaseIterable {
        case generic
        case phoneNumber
        case emailAddress
    }

    public var handle: String
    public var handleType: HandleType
    public var displayName: String?

    public init(handle: String, handleType: HandleType = .generic, displayName: String? = nil) {
        self.handle = handle
        self.handleType = handleType
        self.displayName = displayName
    }

    enum CodingKeys: String, CodingKey { case handle, handleType, displayName }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.handle = try c.requiredString(.handle, maxBytes: ContractLimits.handleBytes)
        self.handleType = try c.optionalEnum(HandleType.self, .handleType) ?? .generic
        self.displayName = try c.optionalString(.displayName, maxBytes: ContractLimits.displayNameBytes)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(handle, forKey: .handle)
        try c.encode(handleType, forKey: .handleType)
        try c.encodeIfPresent(displayName, forKey: .displayName)
    }

    /// The same members as `encode(to:)`, through the contract's writer.
    func write(to json: inout ContractJSONWriter) {
        if let displayName { json.member("displayName", displayName) }
        json.member("handle", handle)
        json.member("handleType", handleType.rawValue)
    }
}
