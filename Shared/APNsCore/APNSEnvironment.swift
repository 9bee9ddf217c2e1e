/// The APNs environment a device token belongs to: the one environment type of the contract, the
/// APNs client, the simulator and the worker. The raw values are the contract's wire strings.
///
/// Tokens from a debug build are `sandbox` tokens.
public enum APNSEnvironment: String, Sendable, Hashable, CaseIterable, Codable {
    /// `api.push.apple.com` — App Store, TestFlight and ad-hoc builds. 200 responses carry no `apns-unique-id`.
    case production
    /// `api.sandbox.push.apple.com` — development builds. 200 responses carry `apns-unique-id`.
    case sandbox
}
