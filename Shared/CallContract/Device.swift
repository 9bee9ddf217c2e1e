import Foundation
#if canImport(Locking)
// The fuzz build (scripts/fuzz) compiles this module's sources with Locking's Hex.swift as one module.
import Locking
#endif

/// Which push service rings a device: APNs (PushKit VoIP pushes to iPhones) or FCM (high-priority
/// data messages to Android phones).
public enum DevicePlatform: String, Sendable, Hashable, Codable, CaseIterable {
    case ios
    case android
}

/// One device of the callee: where the ring goes.
///
/// `platform` is absent in events for iPhones (`ios` is the default, and is not written, so an
/// iOS event keeps the exact bytes and meaning it had before Android devices existed). An
/// `android` device's token is an FCM registration token and it has no `environment`.
public struct Device: Sendable, Hashable, Codable {
    /// iOS: the PushKit VoIP device token, lower-case hexadecimal. Android: the FCM registration
    /// token, verbatim (case matters).
    public var token: String
    /// The APNs environment of an iOS device's token; nil for Android devices.
    public var environment: APNSEnvironment?
    /// The backend's own id for this device (optional, echoed in statuses as `deviceId`).
    public var id: String?
    /// The push service that rings the device (default `ios`).
    public var platform: DevicePlatform

    /// Token length bounds in hex digits: APNs tokens are 32 bytes today; Apple reserves up to 100.
    public static let tokenHexDigits = 64...200
    /// The longest FCM registration token accepted (real ones are ~150–180 characters; FCM publishes
    /// no bound, so this only stops absurd values). The same rule as the FCM client's
    /// `FCMRegistrationToken`, minus its far larger bound: the contract caps a token at 256 bytes.
    public static let fcmTokenMaxBytes = 256

    /// An iOS device.
    public init(token: String, environment: APNSEnvironment, id: String? = nil) {
        self.token = token.lowercased()
        self.environment = environment
        self.id = id
        self.platform = .ios
    }

    /// An Android device, rung through FCM.
    public init(fcmToken token: String, id: String? = nil) {
        self.token = token
        self.environment = nil
        self.id = id
        self.platform = .android
    }

    enum CodingKeys: String, CodingKey { case token, environment, id, platform }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let platform = try c.optionalEnum(DevicePlatform.self, .platform) ?? .ios
        let token = try c.requiredString(.token, maxBytes: ContractLimits.deviceTokenBytes)
        if let problem = Device.tokenProblem(token, platform: platform) { throw c.invalid(.token, problem) }
        switch platform {
        case .ios:
            let environment = try c.requiredEnum(APNSEnvironment.self, .environment)
            self.init(token: token, environment: environment, id: try c.optionalString(.id, maxBytes: ContractLimits.deviceIDBytes))
        case .android:
            if c.contains(.environment), try !c.decodeNil(forKey: .environment) {
                throw c.invalid(.environment, Device.androidEnvironmentProblem)
            }
            self.init(fcmToken: token, id: try c.optionalString(.id, maxBytes: ContractLimits.deviceIDBytes))
        }
    }

    /// Why an `android` device with an `environment` is refused (APNs environments do not apply to FCM).
    static let androidEnvironmentProblem = "does not apply to android devices (FCM has no environments); leave it out"

    /// The device a document's fields describe, by the decoder's rules (shared by the contract's
    /// fast path); nil when a rule fails (the decoder then names the field).
    static func validated(token: String, environment: String?, platform: String?, id: String?) -> Device? {
        let kind: DevicePlatform
        if let platform {
            guard let known = DevicePlatform(rawValue: platform) else { return nil }
            kind = known
        } else {
            kind = .ios
        }
        guard tokenProblem(token, platform: kind) == nil, token.utf8.count <= ContractLimits.deviceTokenBytes else { return nil }
        if let id, id.isEmpty || id.utf8.count > ContractLimits.deviceIDBytes { return nil }
        switch kind {
        case .ios:
            guard let environment, let value = APNSEnvironment(rawValue: environment) else { return nil }
            return Device(token: token, environment: value, id: id)
        case .android:
            guard environment == nil else { return nil }
            return Device(fcmToken: token, id: id)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(token, forKey: .token)
        try c.encodeIfPresent(environment, forKey: .environment)
        try c.encodeIfPresent(id, forKey: .id)
        if platform != .ios { try c.encode(platform, forKey: .platform) }
    }

    /// The same members as `encode(to:)`, through the contract's writer.
    func write(to json: inout ContractJSONWriter) {
        if let environment { json.member("environment", environment.rawValue) }
        if let id { json.member("id", id) }
        if platform != .ios { json.member("platform", platform.rawValue) }
        json.member("token", token)
    }

    /// Why the device's fields do not go together (an iOS device without an environment, an Android
    /// one with one), or nil; for values built in code (the decoder enforces it on events).
    public var consistencyProblem: (field: String, problem: String)? {
        switch platform {
        case .ios where environment == nil: ("environment", "missing")
        case .android where environment != nil: ("environment", Self.androidEnvironmentProblem)
        default: nil
        }
    }

    /// Why `token` is not a valid iOS device token, or nil when it is.
    public static func tokenProblem(_ token: String) -> String? {
        guard Hex.isDigits(token) else { return "not hexadecimal" }
        let count = token.utf8.count
        guard tokenHexDigits.contains(count), count % 2 == 0 else {
            return "wrong length (\(count) hex digits; expected an even number from \(tokenHexDigits.lowerBound) to \(tokenHexDigits.upperBound))"
        }
        return nil
    }

    /// Why `token` is not a valid token for a device of `platform`, or nil when it is.
    public static func tokenProblem(_ token: String, platform: DevicePlatform) -> String? {
        switch platform {
        case .ios: return tokenProblem(token)
        case .android: return fcmTokenProblem(token)
        }
    }

    /// Why `token` cannot be an FCM registration token, or nil. FCM publishes no grammar: real tokens
    /// are ~150–180 characters of `A–Z a–z 0–9 - _ :` (some older ones carry `.`); this refuses what
    /// no token has (spaces, slashes, quotes, other punctuation, non-ASCII) and absurd lengths.
    public static func fcmTokenProblem(_ token: String) -> String? {
        let count = token.utf8.count
        guard count > 0, count <= fcmTokenMaxBytes else {
            return "wrong length (\(count) characters; an FCM registration token has 1 to \(fcmTokenMaxBytes))"
        }
        guard token.utf8.allSatisfy(\.isFCMTokenCharacter) else {
            return "not an FCM registration token (only A-Z a-z 0-9 - _ : . are allowed)"
        }
        return nil
    }

    /// A short, non-reversible label for logs: the first 8 characters and the length.
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

    /// The characters of FCM registration tokens: ASCII letters, digits, '-', '_', ':' and '.'.
    var isFCMTokenCharacter: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self)
            || self == 0x2D || self == 0x5F || self == 0x3A || self == 0x2E
    }
}
