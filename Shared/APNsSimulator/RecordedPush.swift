import Foundation

/// A push the simulator accepted (answered 200), as the device would receive it.
public struct RecordedPush: Sendable, Codable, Equatable {
    /// The device token from the path, lowercased.
    public var deviceToken: String
    /// Request headers: every `apns-*` header plus `content-type`; `authorization` is replaced by
    /// `"bearer <redacted kid=…>"`.
    public var headers: [String: String]
    /// The JSON payload, as sent.
    public var payload: String
    /// When the simulator received the request (simulator clock).
    public var receivedAt: Date
    /// The `apns-id` answered (the request's, or a generated lowercase UUID).
    public var apnsID: String
    /// The `apns-unique-id` answered (sandbox only).
    public var uniqueID: String?
    /// Which connection carried it (1, 2, … in accept order).
    public var connectionID: Int
    /// The HTTP/2 stream ID on that connection.
    public var streamID: Int

    /// Creates a record.
    public init(
        deviceToken: String, headers: [String: String], payload: String, receivedAt: Date,
        apnsID: String, uniqueID: String?, connectionID: Int, streamID: Int
    ) {
        self.deviceToken = deviceToken
        self.headers = headers
        self.payload = payload
        self.receivedAt = receivedAt
        self.apnsID = apnsID
        self.uniqueID = uniqueID
        self.connectionID = connectionID
        self.streamID = streamID
    }
}

/// A recorded push as kept in the ring: its headers as the list they arrived in. The dictionary of
/// ``RecordedPush/headers`` is made only when pushes are queried, not for every accepted push (hashing six
/// header names per push was a visible share of the simulator's time under load).
struct StoredPush: Sendable {
    var deviceToken: String
    var headerFields: [(name: String, value: String)]
    var payload: String
    var receivedAt: Date
    var apnsID: String
    var uniqueID: String?
    var connectionID: Int
    var streamID: Int

    var recorded: RecordedPush {
        RecordedPush(
            deviceToken: deviceToken, headers: Dictionary(headerFields, uniquingKeysWith: { _, last in last }), payload: payload,
            receivedAt: receivedAt, apnsID: apnsID, uniqueID: uniqueID, connectionID: connectionID, streamID: streamID
        )
    }
}

/// Counters of a running simulator (`GET /admin/stats`).
public struct APNSSimulatorStats: Sendable, Codable, Equatable {
    /// Pushes answered 200.
    public var accepted: Int = 0
    /// Non-200 answers by reason.
    public var rejected: [String: Int] = [:]
    /// Connections accepted since start.
    public var connectionsOpened: Int = 0
    /// Connections open now.
    public var connectionsOpen: Int = 0
    /// GOAWAY frames sent by fault injection or shutdown.
    public var goAwaysSent: Int = 0
    /// Connections closed abruptly by fault injection.
    public var connectionsDropped: Int = 0
    /// Connections turned away with GOAWAY on their first stream (`rejectConnections`).
    public var connectionsRejected: Int = 0
    /// Streams reset with REFUSED_STREAM by fault injection (`refusedStreamRate`).
    public var streamsRefused: Int = 0
    /// Streams left unanswered on purpose (`noResponse`).
    public var unanswered: Int = 0
    /// Recorded pushes discarded because the record limit was reached.
    public var recordsDropped: Int = 0
    /// Recorded pushes held now.
    public var recorded: Int = 0

    /// Creates zeroed stats.
    public init() {}
}
