import PushClientSupport

/// The name of an app in the client's configuration (e.g. `"rider"`), as used by callpush events.
public typealias FCMAppID = AppID<FCMClient>

/// One app the client sends for: its Firebase service account (and so its project).
public struct FCMApp: Sendable {
    /// The service account whose access token authorizes the sends; its `project_id` is the FCM project.
    public var serviceAccount: FCMServiceAccount

    public init(serviceAccount: FCMServiceAccount) {
        self.serviceAccount = serviceAccount
    }
}
