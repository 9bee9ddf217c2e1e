import Foundation

extension FCMMessageValidator {
    /// Any JSON key.
    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Thrown by ``FastBody`` for anything it does not decode itself: the generic walk then says what is wrong.
    struct NotFast: Error {}

    /// The typed decoding of a well-formed data message: token target, string data, android fields of
    /// known types, no other message fields. Anything else throws ``NotFast``.
    struct FastBody: Decodable {
        var parsed = Parsed()

        /// The android fields decoded here (`notification` and `fcm_options` go the generic way).
        static let androidFields = FCMMessageValidator.androidFields.subtracting(["notification", "fcm_options", "fcmOptions"])

        init(from decoder: any Decoder) throws {
            let top = try decoder.container(keyedBy: AnyKey.self)
            for key in top.allKeys where !FCMMessageValidator.topLevelFields.contains(key.stringValue) { throw NotFast() }
            for name in ["validate_only", "validateOnly"] where top.contains(AnyKey(name)) {
                parsed.validateOnly = try top.decode(Bool.self, forKey: AnyKey(name))
            }
            guard top.contains(AnyKey("message")) else { throw NotFast() }
            let message = try top.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("message"))
            for key in message.allKeys {
                switch key.stringValue {
                case "token", "topic", "condition": parsed.targets.append(key.stringValue)
                case "data", "android": continue
                default: throw NotFast()
                }
            }
            if message.contains(AnyKey("token")) { parsed.token = try message.decode(String.self, forKey: AnyKey("token")) }
            if message.contains(AnyKey("data")) { parsed.data = try message.decode([String: String].self, forKey: AnyKey("data")) }
            if message.contains(AnyKey("android")) {
                let android = try message.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("android"))
                var fields = RecordedFCMMessage.Android()
                func string(_ names: String...) throws -> String? {
                    guard let name = names.first(where: { android.contains(AnyKey($0)) }) else { return nil }
                    return try android.decode(String.self, forKey: AnyKey(name))
                }
                func bool(_ names: String...) throws -> Bool? {
                    guard let name = names.first(where: { android.contains(AnyKey($0)) }) else { return nil }
                    return try android.decode(Bool.self, forKey: AnyKey(name))
                }
                for key in android.allKeys where !Self.androidFields.contains(key.stringValue) { throw NotFast() }
                fields.priority = try string("priority")
                fields.ttl = try string("ttl")
                fields.collapseKey = try string("collapse_key", "collapseKey")
                fields.restrictedPackageName = try string("restricted_package_name", "restrictedPackageName")
                fields.directBootOk = try bool("direct_boot_ok", "directBootOk")
                _ = try bool("bandwidth_constrained_ok", "bandwidthConstrainedOk")
                _ = try bool("restricted_satellite_ok", "restrictedSatelliteOk")
                if android.contains(AnyKey("data")) { fields.data = try android.decode([String: String].self, forKey: AnyKey("data")) }
                parsed.android = fields
            }
        }
    }

    /// The generic walk: every JSON-level error (not JSON, unknown fields, wrong types) named like FCM names it.
    static func parseGeneric(_ body: [UInt8]) -> Result<Parsed, FCMErrorAnswer> {
        guard let root = try? JSONDecoder().decode(JSONValue.self, from: Data(body)) else {
            return .failure(.invalidJSON("", "Body is not valid JSON."))
        }
        guard let top = root.object else { return .failure(.invalidJSON("", "Root element must be a message.")) }
        if let unknown = top.keys.sorted().first(where: { !topLevelFields.contains($0) }) {
            return .failure(.invalidJSON("", "Unknown name \"\(unknown.prefix(64))\": Cannot find field."))
        }
        var parsed = Parsed()
        if let flag = top["validate_only"] ?? top["validateOnly"] {
            guard case .bool(let value) = flag else {
                return .failure(.invalidJSON("validate_only", "Invalid value at 'validate_only' (TYPE_BOOL), \(flag.typeName)"))
            }
            parsed.validateOnly = value
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
        parsed.targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        if let value = message["token"] {
            guard let token = value.string else {
                return .failure(.invalidJSON("message.token", "Invalid value at 'message.token' (TYPE_STRING), \(value.typeName)"))
            }
            parsed.token = token
        }
        parsed.hasNotification = message["notification"] != nil
        do throws(FCMErrorAnswer) {
            parsed.data = try stringMap(message["data"], field: "message.data").get()
            if let android = message["android"] { parsed.android = try parseAndroid(android).get() }
        } catch {
            return .failure(error)
        }
        return .success(parsed)
    }

    private static func parseAndroid(_ value: JSONValue) -> Result<RecordedFCMMessage.Android, FCMErrorAnswer> {
        guard let android = value.object else {
            return .failure(.invalidJSON("message.android", "Invalid value at 'message.android' (TYPE_MESSAGE), \(value.typeName)"))
        }
        if let unknown = android.keys.sorted().first(where: { !androidFields.contains($0) }) {
            return .failure(.invalidJSON("message.android", "Unknown name \"\(unknown.prefix(64))\" at 'message.android': Cannot find field."))
        }
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
        var result = RecordedFCMMessage.Android()
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
}
