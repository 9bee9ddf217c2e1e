import Foundation

/// One high-priority data message to one Android device (FCM HTTP v1).
///
/// The client sends it as
/// ```json
/// {"message": {"token": "…", "data": {"callId": "…", …},
///   "android": {"priority": "HIGH", "ttl": "12.5s", "collapse_key": "<collapseKey>", "direct_boot_ok": true}}}
/// ```
/// Data-only (no `notification`): the app's `FirebaseMessagingService.onMessageReceived` runs even in the
/// background and turns it into a ringing call. `ttl` is the time left to ``deadline`` when the request is made.
public struct FCMMessage: Sendable {
    /// FCM's limit on the data payload: keys and values, UTF-8 bytes.
    public static let maximumDataSize = 4096
    /// FCM's longest TTL (28 days); a later deadline is sent as this.
    public static let maximumTTL: Duration = .seconds(28 * 24 * 3600)

    /// The key of the app (service account) in the client's configuration.
    public var app: FCMAppID
    /// The FCM registration token of the device.
    public var token: String
    /// The data payload: string keys and string values (FCM's rule), e.g. the call fields and the ack token.
    public var data: [String: String]
    /// `android.collapse_key`: the call id, so a newer message for the same call replaces a stored one.
    public var collapseKey: String
    /// When ringing no longer makes sense: `android.ttl` is the time left to it, and nothing is sent after it.
    public var deadline: Date
    /// Overrides the client's default request timeout for this message (the deadline still bounds it).
    public var timeout: Duration?

    public init(
        app: FCMAppID, token: String, data: [String: String], collapseKey: String, deadline: Date,
        timeout: Duration? = nil
    ) {
        self.app = app
        self.token = token
        self.data = data
        self.collapseKey = collapseKey
        self.deadline = deadline
        self.timeout = timeout
    }

    /// The size FCM counts against ``maximumDataSize``: every key and value in UTF-8 bytes.
    public var dataSize: Int {
        data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
    }

    /// Checks what can be checked before sending: token shape, data size and keys, collapse key, deadline.
    ///
    /// ``FCMClient/send(_:)`` runs this itself and reports a failure as an outcome; call it earlier to
    /// reject a request up front.
    public func validate(now: Date = Date()) throws(FCMError) {
        guard FCMRegistrationToken.isValid(token) else {
            throw FCMError(.invalidRegistrationToken, "registration token must be 1...4096 characters of A-Z a-z 0-9 - _ : . (\(token.utf8.count) given)")
        }
        let size = dataSize
        guard size <= Self.maximumDataSize else {
            throw FCMError(.dataTooLarge, "data is \(size) bytes (keys and values), FCM's limit is \(Self.maximumDataSize)")
        }
        for key in data.keys {
            if let problem = Self.keyProblem(key) {
                throw FCMError(.invalidData, "data key '\(key.prefix(64))' \(problem)")
            }
        }
        guard !collapseKey.isEmpty, collapseKey.utf8.count <= 256 else {
            throw FCMError(.invalidData, "collapse key must be 1...256 bytes (\(collapseKey.utf8.count) given)")
        }
        guard Self.ttl(until: deadline, now: now) != nil else {
            throw FCMError(.deadlinePassed, "the message's deadline passed \(Self.milliseconds(now.timeIntervalSince(deadline))) ms ago; not sent")
        }
    }

    /// Why FCM would refuse a data key (`nil` when it is fine): empty, `from`, `message_type`, or a
    /// `google.` / `gcm.` prefix (FCM's reserved words).
    public static func keyProblem(_ key: String) -> String? {
        if key.isEmpty { return "is empty" }
        if key == "from" || key == "message_type" { return "is reserved by FCM" }
        if key.hasPrefix("google.") || key.hasPrefix("gcm.") { return "has a prefix reserved by FCM" }
        return nil
    }

    /// The time left to `deadline` as FCM's duration string (`"12.5s"`, millisecond precision, at most
    /// ``maximumTTL``), or `nil` when less than a millisecond is left: a TTL is never negative.
    public static func ttl(until deadline: Date, now: Date = Date()) -> String? {
        let left = deadline.timeIntervalSince(now)
        guard left.isFinite, left >= 0.001 else { return nil }
        let ms = min(Int64((left * 1000).rounded()), Int64(maximumTTL.components.seconds) * 1000)
        return durationString(milliseconds: ms)
    }

    /// `1500` → `"1.5s"`, `12000` → `"12s"`, `7` → `"0.007s"` (protobuf's JSON form of a Duration).
    static func durationString(milliseconds ms: Int64) -> String {
        let seconds = ms / 1000
        var fraction = ms % 1000
        guard fraction != 0 else { return "\(seconds)s" }
        var digits = 3
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        let text = String(fraction)
        return "\(seconds)." + String(repeating: "0", count: digits - text.count) + text + "s"
    }

    private static func milliseconds(_ seconds: TimeInterval) -> Int64 {
        seconds.isFinite ? Int64((seconds * 1000).rounded()) : 0
    }
}

/// FCM registration tokens: opaque, today ~150–180 characters of `A-Z a-z 0-9 - _ :` (some older ones
/// carry `.`). FCM publishes no grammar; this accepts what real tokens use and refuses what no token
/// has (spaces, slashes, quotes, control characters), so a bad value never reaches a request.
public enum FCMRegistrationToken {
    /// The longest token accepted (far above real ones).
    public static let maximumLength = 4096

    /// Whether `token` can be a registration token.
    public static func isValid(_ token: String) -> Bool {
        let utf8 = token.utf8
        guard !utf8.isEmpty, utf8.count <= maximumLength else { return false }
        return utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":")
                || byte == UInt8(ascii: ".")
        }
    }

    /// The loggable form of a token: its first 8 characters.
    public static func redacted(_ token: String) -> String {
        String(token.prefix(8)) + "…"
    }
}
