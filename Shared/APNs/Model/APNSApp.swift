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

    /// Apple's rule for bundle ids: letters, digits, `.` and `-` (at most 155 characters).
    public static func isValidBundleID(_ bundleID: String) -> Bool {
        let bytes = bundleID.utf8
        return (1...155).contains(bytes.count) && bytes.allSatisfy { byte in
            (byte | 0x20) &- UInt8(ascii: "a") < 26 || byte &- UInt8(ascii: "0") < 10 || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
        }
    }
}
