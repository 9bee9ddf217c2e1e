/// The name of an app in the client's configuration (e.g. `"rider"`), as used by callpush events.
public struct APNSAppID: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }
}

/// One app the client pushes for: its bundle id and its credentials.
public struct APNSApp: Sendable {
    /// The iOS bundle id; the VoIP topic is `<bundleID>.voip`.
    public var bundleID: String
    /// Token (.p8) or certificate credentials.
    public var credentials: APNSCredentials

    public init(bundleID: String, credentials: APNSCredentials) {
        self.bundleID = bundleID
        self.credentials = credentials
    }

    /// The `apns-topic` for VoIP pushes.
    public var voipTopic: String { bundleID + ".voip" }
}
