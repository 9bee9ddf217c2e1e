import Foundation

extension FCMMessageValidator {
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
