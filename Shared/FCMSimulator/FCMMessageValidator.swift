import Foundation

/// Checks a `messages:send` body like FCM's HTTP v1 API and picks out what the simulator records.
///
/// Proto JSON rules first: both field spellings are accepted (`collapse_key` / `collapseKey`), unknown
/// fields and wrong JSON types are refused ("Invalid JSON payload received."). Then FCM's own rules: one
/// target, a valid registration token, priority and TTL values, collapse key, string data within 4096 bytes
/// without reserved keys.
///
/// A well-formed message is read by ``FastReader`` straight from the bytes; only a body it does not read is
/// walked as generic JSON (``JSONValue``, on `JSONDecoder`), which decides what is wrong and names it.
enum FCMMessageValidator {
    struct Accepted {
        var token: String
        var data: [String: String]
        var android: RecordedFCMMessage.Android?
        var hasNotification: Bool
        var validateOnly: Bool
    }

    /// What the JSON stage found, for the FCM-rules stage.
    struct Parsed: Equatable {
        var validateOnly = false
        var targets: [String] = []
        var token: String?
        var data: [String: String] = [:]
        var android: RecordedFCMMessage.Android?
        var hasNotification = false
    }

    static let maximumDataSize = 4096
    static let maximumTTLSeconds: Double = 28 * 24 * 3600

    static let topLevelFields: Set<String> = ["message", "validate_only", "validateOnly"]
    static let messageFields: Set<String> = [
        "name", "data", "notification", "android", "webpush", "apns", "fcm_options", "fcmOptions", "token", "topic", "condition",
    ]
    static let androidFields: Set<String> = [
        "collapse_key", "collapseKey", "priority", "ttl", "restricted_package_name", "restrictedPackageName", "data",
        "notification", "fcm_options", "fcmOptions", "direct_boot_ok", "directBootOk", "bandwidth_constrained_ok",
        "bandwidthConstrainedOk", "restricted_satellite_ok", "restrictedSatelliteOk",
    ]

    static func validate(_ body: [UInt8]) -> Result<Accepted, FCMErrorAnswer> {
        let parsed: Parsed
        if let fast = FastReader.parse(body) {
            parsed = fast
        } else {
            switch parseGeneric(body) {
            case .success(let value): parsed = value
            case .failure(let answer): return .failure(answer)
            }
        }
        return check(parsed)
    }

    // MARK: FCM's rules

    static func check(_ parsed: Parsed) -> Result<Accepted, FCMErrorAnswer> {
        guard !parsed.targets.isEmpty else {
            return .failure(.invalidArgument("message", "Recipient of the message is not set."))
        }
        guard parsed.targets == ["token"], let token = parsed.token else {
            return .failure(.invalidArgument("message", parsed.targets.count > 1
                ? "Exactly one of token, topic or condition must be set."
                : "The simulator delivers to registration tokens only (\(parsed.targets[0]) targets are not simulated)."))
        }
        guard isRegistrationToken(token) else {
            return .failure(.invalidArgument("message.token", "The registration token is not a valid FCM registration token"))
        }
        if let android = parsed.android {
            if let priority = android.priority, priority.uppercased() != "HIGH", priority.uppercased() != "NORMAL" {
                return .failure(.invalidJSON("message.android.priority", "Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), \"\(priority.prefix(32))\""))
            }
            if let ttl = android.ttl {
                guard let seconds = parseDuration(ttl) else {
                    return .failure(.invalidJSON("message.android.ttl", "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), \"\(ttl.prefix(32))\""))
                }
                guard seconds <= maximumTTLSeconds else {
                    return .failure(.invalidArgument("message.android.ttl", "TTL must be at most 2419200s (4 weeks)."))
                }
            }
            if let key = android.collapseKey, key.isEmpty || key.utf8.count > 256 {
                return .failure(.invalidArgument("message.android.collapse_key", "Collapse key must be 1 to 256 bytes."))
            }
        }
        var allData = parsed.data
        if let androidData = parsed.android?.data { allData.merge(androidData) { first, _ in first } }
        // Sorted only to name the first reserved key when there is one.
        if allData.keys.contains(where: isReserved), let key = allData.keys.sorted().first(where: isReserved) {
            return .failure(.invalidArgument("message.data", "Invalid data payload key: \(key.prefix(64))"))
        }
        let size = allData.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        guard size <= maximumDataSize else {
            return .failure(.invalidArgument("message", "Android message is too big"))
        }
        return .success(Accepted(
            token: token, data: parsed.data, android: parsed.android, hasNotification: parsed.hasNotification,
            validateOnly: parsed.validateOnly))
    }

    /// FCM's reserved data keys.
    static func isReserved(_ key: String) -> Bool {
        key.isEmpty || key == "from" || key == "message_type" || key.hasPrefix("google.") || key.hasPrefix("gcm.")
    }

    /// What registration tokens look like (see docs/fcm-simulator.md): 1…4096 of `A-Z a-z 0-9 - _ : .`.
    static func isRegistrationToken(_ token: String) -> Bool {
        let utf8 = token.utf8
        guard !utf8.isEmpty, utf8.count <= 4096 else { return false }
        return utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2D || byte == 0x5F || byte == 0x3A || byte == 0x2E
        }
    }

    /// A protobuf Duration in JSON: `"<seconds>[.<1-9 digits>]s"`, not negative. Returns the seconds.
    static func parseDuration(_ text: String) -> Double? {
        let utf8 = text.utf8
        guard utf8.last == UInt8(ascii: "s") else { return nil }
        let number = utf8.dropLast()
        let point = number.firstIndex(of: UInt8(ascii: "."))
        let whole = number[..<(point ?? number.endIndex)]
        guard !whole.isEmpty, whole.count <= 12, whole.allSatisfy(isDigit) else { return nil }
        if let point {
            let fraction = number[number.index(after: point)...]
            guard (1...9).contains(fraction.count), fraction.allSatisfy(isDigit) else { return nil }
        }
        return Double(Substring(number))
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}
