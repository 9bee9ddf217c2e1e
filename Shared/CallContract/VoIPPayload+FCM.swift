import Foundation

/// The payload as an Android device receives it: an FCM data message (`RemoteMessage.getData()`).
///
/// The same fields as the VoIP payload; FCM carries only strings, so `hasVideo` is `"true"` or
/// `"false"`, `replay` and `maxDurationSeconds` are decimal text, and `attributes` is a JSON object
/// in a string. Absent optionals (`displayName`, `maxDurationSeconds`) are absent keys.
extension VoIPPayload {
    /// FCM's limit on a data message: keys and values together, UTF-8 bytes.
    public static let fcmMaxDataBytes = 4096

    /// The data message, refused with `.payloadTooLarge` when over FCM's 4096-byte limit.
    public func fcmData() throws(ContractError) -> [String: String] {
        var data: [String: String] = [
            "ackToken": ackToken,
            "callId": callId,
            "deviceKey": deviceKey,
            "handle": handle,
            "handleType": handleType.rawValue,
            "hasVideo": hasVideo ? "true" : "false",
            "replay": String(replay),
            "ringDeadline": ContractCoding.format(ringDeadline),
        ]
        data["attributes"] = Self.jsonObject(attributes)
        if let displayName { data["displayName"] = displayName }
        if let maxDurationSeconds { data["maxDurationSeconds"] = String(maxDurationSeconds) }
        let size = Self.fcmDataSize(data)
        guard size <= Self.fcmMaxDataBytes else {
            throw ContractError(.payloadTooLarge, path: "attributes",
                                "FCM data would be \(size) bytes (limit \(Self.fcmMaxDataBytes))")
        }
        return data
    }

    /// What FCM counts against its limit: every key and value in UTF-8 bytes.
    public static func fcmDataSize(_ data: [String: String]) -> Int {
        data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
    }

    /// `map` as a JSON object, written as the contract writes the VoIP payload's `attributes`.
    static func jsonObject(_ map: [String: String]) -> String {
        var json = ContractJSONWriter(capacity: 64)
        json.object { $0.member("a", map) }
        // `{"a":{…}}` → `{…}`
        return String(decoding: json.bytes.dropFirst(5).dropLast(), as: UTF8.self)
    }

    /// Reads a payload back from its FCM data message with the VoIP payload's rules (what a test,
    /// or an app's Swift code, does with `RemoteMessage.getData()`); the error names the field.
    public init(fcmData data: [String: String]) throws(ContractError) {
        var object: [String: Any] = [:]
        for (key, value) in data {
            switch key {
            case "hasVideo":
                guard value == "true" || value == "false" else { throw ContractError(.wrongType, path: key, "expected \"true\" or \"false\"") }
                object[key] = value == "true"
            case "replay", "maxDurationSeconds":
                guard let number = Int(value) else { throw ContractError(.wrongType, path: key, "expected an integer") }
                object[key] = number
            case "attributes":
                guard let parsed = try? JSONSerialization.jsonObject(with: Data(value.utf8)) as? [String: String] else {
                    throw ContractError(.wrongType, path: key, "expected a JSON object of strings")
                }
                object[key] = parsed
            default:
                object[key] = value
            }
        }
        guard let json = try? JSONSerialization.data(withJSONObject: object) else {
            throw ContractError(.malformedJSON, path: "", "the data cannot be read as a payload")
        }
        self = try VoIPPayload.decode(json)
    }
}
