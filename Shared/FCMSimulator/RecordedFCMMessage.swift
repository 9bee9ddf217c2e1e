import Foundation

/// A message the simulator accepted (answered 200), as the device would receive it.
public struct RecordedFCMMessage: Sendable, Codable, Equatable {
    /// The name answered: `projects/<project>/messages/<id>`.
    public var name: String
    /// The project from the path.
    public var project: String
    /// The registration token.
    public var token: String
    /// `message.data`.
    public var data: [String: String]
    /// `message.android`'s fields (both JSON spellings, e.g. `collapse_key` and `collapseKey`, are read).
    public var android: Android?
    /// Whether the message also had a `notification` (callpush's never do: data-only).
    public var hasNotification: Bool
    /// The service account (client email) whose access token authorized it.
    public var account: String
    /// `HTTP/2` or `HTTP/1.1`.
    public var httpVersion: String
    /// When the simulator received it (simulator clock).
    public var receivedAt: Date

    /// `message.android`.
    public struct Android: Sendable, Codable, Equatable {
        public var priority: String?
        public var ttl: String?
        public var collapseKey: String?
        public var directBootOk: Bool?
        public var restrictedPackageName: String?
        public var data: [String: String]?
    }
}

/// Counters of a running simulator (`GET /admin/stats`).
public struct FCMSimulatorStats: Sendable, Codable, Equatable {
    /// Messages answered 200 (dry runs included).
    public var accepted: Int = 0
    /// Non-200 `messages:send` answers by FCM error code (or `google.rpc` status when there is none).
    public var rejected: [String: Int] = [:]
    /// Requests to the token endpoint.
    public var tokenRequests: Int = 0
    /// Access tokens issued.
    public var tokensIssued: Int = 0
    /// Refused token requests by OAuth error.
    public var tokenRequestsRefused: [String: Int] = [:]
    /// Requests by HTTP version (`HTTP/2`, `HTTP/1.1`).
    public var requestsByVersion: [String: Int] = [:]
    /// Recorded messages held now.
    public var recorded: Int = 0
    /// Recorded messages discarded because the record limit was reached.
    public var recordsDropped: Int = 0

    public init() {}
}
