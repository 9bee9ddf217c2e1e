/// The name of an app in the client's configuration (e.g. `"rider"`), as used by callpush events.
public struct FCMAppID: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }
}

/// One app the client sends for: its Firebase service account (and so its project).
public struct FCMApp: Sendable {
    /// The service account whose access token authorizes the sends; its `project_id` is the FCM project.
    public var serviceAccount: FCMServiceAccount

    public init(serviceAccount: FCMServiceAccount) {
        self.serviceAccount = serviceAccount
    }
}
