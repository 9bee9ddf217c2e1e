import Foundation

/// The APNs environment a device token belongs to. Tokens from a debug build are `sandbox` tokens.
public enum APNsEnvironment: String, Sendable, Hashable, Codable, CaseIterable {
    case production
    case sandbox
}

/// One device of the callee: where the VoIP push goes.
public struct Device: Sendable, Hashable, Codable {
    /// The PushKit VoIP device token, lower-case hexadecimal.
    public var token: String
    public var environment: APNsEnvironment
    /// The backend's own id for this device (optional, echoed in statuses as `deviceId`).
    public var id: String?

    /// Token length bounds in hex digits: APNs tokens are 32 bytes today; Apple reserves up to 100.
    public static let tokenHexDigits = 64...200

    public init(token: String, environment: APNsEnvironment, id: String? = nil) {
        self.token = token.lowercased()
        self.environment = environment
        self.id = id
    }

    enum CodingKeys: String, CodingKey { case token, environment, id }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let token = try c.requiredString(.token, maxBytes: 256)
        if let problem = Device.tokenProblem(token) { throw c.invalid(.token, problem) }
        self.token = token.lowercased()
        self.environment = try c.requiredEnum(APNsEnvironment.self, .environment)
        self.id = try c.optionalString(.id, maxBytes: 128)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(token, forKey: .token)
        try c.encode(environment, forKey: .environment)
        try c.encodeIfPresent(id, forKey: .id)
    }

    /// The same members as `encode(to:)`, through the contract's writer.
    func write(to json: inout ContractJSONWriter) {
        json.member("environment", environment.rawValue)
        if let id { json.member("id", id) }
        json.member("token", token)
    }

    /// Why `token` is not a valid device token, or nil when it is.
    public static func tokenProblem(_ token: String) -> String? {
        guard token.utf8.allSatisfy({ $0.isHexDigit }) else { return "not hexadecimal" }
        let count = token.utf8.count
        guard tokenHexDigits.contains(count), count % 2 == 0 else {
            return "wrong length (\(count) hex digits; expected an even number from \(tokenHexDigits.lowerBound) to \(tokenHexDigits.upperBound))"
        }
        return nil
    }

    /// A short, non-reversible label for logs: the first 8 hex digits and the length.
    public var redactedToken: String { Device.redact(token) }

    /// A short, non-reversible label for a device token, safe to log.
    public static func redact(_ token: String) -> String {
        "\(token.prefix(8))…(\(token.utf8.count))"
    }
}

extension UInt8 {
    /// ASCII letters, digits, '.', '-' and '_'.
    var isAppNameCharacter: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self)
            || self == 0x2E || self == 0x2D || self == 0x5F
    }

    var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x61...0x66).contains(self) || (0x41...0x46).contains(self)
    }
}
