import PushClientSupport

/// The name of an app in the client's configuration (e.g. `"rider"`), as used by callpush events.
public typealias APNSAppID = AppID<APNSClient>

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
