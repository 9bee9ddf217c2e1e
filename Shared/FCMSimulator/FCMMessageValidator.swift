import Foundation

/// Checks a `messages:send` body like FCM's HTTP v1 API and picks out what the simulator records.
///
/// Proto JSON rules: both field spellings are accepted (`collapse_key` / `collapseKey`), unknown fields and
/// wrong types are refused ("Invalid JSON payload received."), then FCM's own rules (one target, a valid
/// registration token, string data within 4096 bytes without reserved keys, priority, TTL format and range).
enum FCMMessageValidator {
    struct Accepted {
        var token: String
        var data: [String: String]
        var android: RecordedFCMMessage.Android?
        var hasNotification: Bool
        var validateOnly: Bool
    }

    static let maximumDataSize = 4096
    static let maximumTTLSeconds: Double = 28 * 24 * 3600

    private static let topLevelFields: Set<String> = ["message", "validate_only", "validateOnly"]
    private static let messageFields: Set<String> = [
        "name", "data", "notification", "android", "webpush", "apns", "fcm_options", "fcmOptions", "token", "topic", "condition",
    ]
    private static let androidFields: Set<String> = [
        "collapse_key", "collapseKey", "priority", "ttl", "restricted_package_name", "restrictedPackageName", "data",
        "notification", "fcm_options", "fcmOptions", "direct_boot_ok", "directBootOk", "bandwidth_constrained_ok",
        "bandwidthConstrainedOk", "restricted_satellite_ok", "restrictedSatelliteOk",
    ]

    static func validate(_ body: [UInt8]) -> Result<Accepted, FCMErrorAnswer> {
        guard let root = try? JSONDecoder().decode(JSONValue.self, from: Data(body)) else {
            return .failure(.invalidJSON("", "Body is not valid JSON."))
        }
        guard let top = root.object else { return .failure(.invalidJSON("", "Root element must be a message.")) }
        if let unknown = top.keys.sorted().first(where: { !topLevelFields.contains($0) }) {
            return .failure(.invalidJSON("", "Unknown name \"\(unknown.prefix(64))\": Cannot find field."))
        }
        var validateOnly = false
        if let flag = top["validate_only"] ?? top["validateOnly"] {
            guard case .bool(let value) = flag else {
                return .failure(.invalidJSON("validate_only", "Invalid value at 'validate_only' (TYPE_BOOL), \(flag.typeName)"))
            }
            validateOnly = value
        }
        guard let messageValue = top["message"] else {
            return .failure(.invalidArgument("message", "Request contains an invalid argument: message is missing."))
        }
        guard let message = messageValue.object else {
            return .failure(.invalidJSON("message", "Invalid value at 'message' (TYPE_MESSAGE), \(messageValue.typeName)"))
        }
        if let unknown = message.keys.sorted().first(where: { !messageFields.contains($0) }) {
            return .failure(.invalidJSON("message", "Unknown name \"\(unknown.prefix(64))\" at 'message': Cannot find field."))
        }
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard !targets.isEmpty else {
            return .failure(.invalidArgument("message", "Recipient of the message is not set."))
        }
        guard targets == ["token"] else {
            return .failure(.invalidArgument("message", targets.count > 1
                ? "Exactly one of token, topic or condition must be set."
                : "The simulator delivers to registration tokens only (\(targets[0]) targets are not simulated)."))
        }
        guard let token = message["token"]?.string else {
            return .failure(.invalidJSON("message.token", "Invalid value at 'message.token' (TYPE_STRING)"))
        }
        guard isRegistrationToken(token) else {
            return .failure(.invalidArgument("message.token", "The registration token is not a valid FCM registration token"))
        }
        let data: [String: String]
        switch stringMap(message["data"], field: "message.data") {
        case .success(let value): data = value
        case .failure(let answer): return .failure(answer)
        }
        var android: RecordedFCMMessage.Android?
        if let androidValue = message["android"] {
            switch validateAndroid(androidValue) {
            case .success(let value): android = value
            case .failure(let answer): return .failure(answer)
            }
        }
        let allData = data.merging(android?.data ?? [:]) { first, _ in first }
        if let key = allData.keys.sorted().first(where: isReserved) {
            return .failure(.invalidArgument("message.data", "Invalid data payload key: \(key.prefix(64))"))
        }
        let size = allData.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        guard size <= maximumDataSize else {
            return .failure(.invalidArgument("message", "Android message is too big"))
        }
        return .success(Accepted(
            token: token, data: data, android: android, hasNotification: message["notification"] != nil, validateOnly: validateOnly))
    }

    private static func validateAndroid(_ value: JSONValue) -> Result<RecordedFCMMessage.Android, FCMErrorAnswer> {
        guard let android = value.object else {
            return .failure(.invalidJSON("message.android", "Invalid value at 'message.android' (TYPE_MESSAGE), \(value.typeName)"))
        }
        if let unknown = android.keys.sorted().first(where: { !androidFields.contains($0) }) {
            return .failure(.invalidJSON("message.android", "Unknown name \"\(unknown.prefix(64))\" at 'message.android': Cannot find field."))
        }
        var result = RecordedFCMMessage.Android()
        func string(_ names: [String]) -> Result<String?, FCMErrorAnswer> {
            guard let name = names.first(where: { android[$0] != nil }), let value = android[name] else { return .success(nil) }
            guard let text = value.string else {
                return .failure(.invalidJSON("message.android.\(names[0])", "Invalid value at 'message.android.\(names[0])' (TYPE_STRING), \(value.typeName)"))
            }
            return .success(text)
        }
        func bool(_ names: [String]) -> Result<Bool?, FCMErrorAnswer> {
            guard let name = names.first(where: { android[$0] != nil }), let value = android[name] else { return .success(nil) }
            guard case .bool(let flag) = value else {
                return .failure(.invalidJSON("message.android.\(names[0])", "Invalid value at 'message.android.\(names[0])' (TYPE_BOOL), \(value.typeName)"))
            }
            return .success(flag)
        }
        do throws(FCMErrorAnswer) {
            result.priority = try string(["priority"]).get()
            result.ttl = try string(["ttl"]).get()
            result.collapseKey = try string(["collapse_key", "collapseKey"]).get()
            result.restrictedPackageName = try string(["restricted_package_name", "restrictedPackageName"]).get()
            result.directBootOk = try bool(["direct_boot_ok", "directBootOk"]).get()
            _ = try bool(["bandwidth_constrained_ok", "bandwidthConstrainedOk"]).get()
            _ = try bool(["restricted_satellite_ok", "restrictedSatelliteOk"]).get()
            if android["data"] != nil {
                result.data = try stringMap(android["data"], field: "message.android.data").get()
            }
        } catch {
            return .failure(error)
        }
        if let priority = result.priority, !["HIGH", "NORMAL"].contains(priority.uppercased()) {
            return .failure(.invalidJSON("message.android.priority", "Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), \"\(priority.prefix(32))\""))
        }
        if let ttl = result.ttl {
            guard let seconds = parseDuration(ttl) else {
                return .failure(.invalidJSON("message.android.ttl", "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), \"\(ttl.prefix(32))\""))
            }
            guard seconds <= maximumTTLSeconds else {
                return .failure(.invalidArgument("message.android.ttl", "TTL must be at most 2419200s (4 weeks)."))
            }
        }
        if let key = result.collapseKey, key.utf8.count > 256 || key.isEmpty {
            return .failure(.invalidArgument("message.android.collapse_key", "Collapse key must be 1 to 256 bytes."))
        }
        return .success(result)
    }

    private static func stringMap(_ value: JSONValue?, field: String) -> Result<[String: String], FCMErrorAnswer> {
        guard let value else { return .success([:]) }
        guard let object = value.object else {
            return .failure(.invalidJSON(field, "Invalid value at '\(field)' (TYPE_MESSAGE), \(value.typeName)"))
        }
        var map: [String: String] = [:]
        for (index, (key, entry)) in object.sorted(by: { $0.key < $1.key }).enumerated() {
            guard let text = entry.string else {
                return .failure(.invalidJSON("\(field)[\(index)].value", "Invalid value at '\(field)[\(index)].value' (TYPE_STRING), \(entry.typeName)"))
            }
            map[key] = text
        }
        return .success(map)
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
        guard text.hasSuffix("s") else { return nil }
        let number = text.dropLast()
        let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.count <= 12, whole.allSatisfy(\.isASCIIDigit) else { return nil }
        if parts.count == 2 {
            let fraction = parts[1]
            guard (1...9).contains(fraction.count), fraction.allSatisfy(\.isASCIIDigit) else { return nil }
        }
        return Double(number)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
