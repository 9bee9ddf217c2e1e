import Foundation
import Locking
import NIOCore
import NIOHPACK

/// The request line and headers of one push, split into what the validator needs (read in one pass: the
/// headers the checks ask for are picked out as they go by).
struct PushRequestHead: Sendable {
    var method: String?
    var path: String?
    /// Regular (non-pseudo) headers, names lowercased, in order.
    var fields: [(name: String, value: String)] = []
    var topic: String?
    var pushType: String?
    var priority: String?
    var expiration: String?
    var apnsID: String?
    var collapseID: String?
    var authorization: String?

    init(headers: HPACKHeaders) {
        fields.reserveCapacity(headers.count)
        for (name, value, _) in headers {
            // Names are told apart by length first, then one comparison (a `switch` over strings compares the
            // name with every case in turn, ~50 string comparisons per request).
            let length = name.utf8.count
            if name.utf8.first == UInt8(ascii: ":") {
                if length == 7, name == ":method" {
                    method = value
                } else if length == 5, name == ":path" {
                    path = value
                }
                continue
            }
            // HTTP/2 header names are lowercase (the framing resets streams with others). A repeated header
            // keeps its first value here; `route` refuses repeats anyway.
            fields.append((name, value))
            switch length {
            case 7: if name == "apns-id", apnsID == nil { apnsID = value }
            case 10: if name == "apns-topic", topic == nil { topic = value }
            case 13:
                if name == "apns-priority" {
                    if priority == nil { priority = value }
                } else if name == "authorization", authorization == nil {
                    authorization = value
                }
            case 14: if name == "apns-push-type", pushType == nil { pushType = value }
            case 15: if name == "apns-expiration", expiration == nil { expiration = value }
            case 16: if name == "apns-collapse-id", collapseID == nil { collapseID = value }
            default: break
            }
        }
    }
}

/// What passed the checks that come before authentication.
struct RoutedPush: Sendable {
    var deviceToken: String
}

/// A push that passed every check.
struct ValidatedPush: Sendable {
    var deviceToken: String
    /// The headers a record keeps (`apns-*`, `content-type`), in arrival order; names are unique (duplicates were refused).
    var recordHeaders: [(name: String, value: String)]
    var payload: String
}

/// APNs request validation, in the order: method, path, device token, duplicate headers (then the caller
/// checks authentication), then headers and payload. Each failure is the status and reason APNs answers.
enum RequestValidator {
    /// Largest payload for `apns-push-type: voip`.
    static let voipPayloadLimit = 5120
    /// Largest payload for every other push type.
    static let payloadLimit = 4096
    /// Push types APNs knows.
    static let knownPushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]

    /// The `apns-id` to answer with: the request's if it is a UUID, else nil (the caller generates one).
    static func requestAPNSID(_ head: PushRequestHead) -> String? {
        guard let id = head.apnsID, Hex.isUUIDText(id) else { return nil }
        return id
    }

    /// Method, path, token format and duplicate headers.
    static func route(_ head: PushRequestHead) -> Result<RoutedPush, APNSReason> {
        guard head.method == "POST" else { return .failure(.methodNotAllowed) }
        guard let path = head.path else { return .failure(.badPath) }
        let prefix = "/3/device".utf8
        let utf8 = path.utf8
        guard utf8.starts(with: prefix) else { return .failure(.badPath) }
        let rest = utf8.dropFirst(prefix.count)
        guard rest.isEmpty || rest.first == UInt8(ascii: "/") else { return .failure(.badPath) }
        let token = rest.dropFirst()
        guard !token.isEmpty else { return .failure(.missingDeviceToken) }
        guard DeviceToken.isValid(Substring(token)) else { return .failure(.badDeviceToken) }
        // A handful of headers: pairwise comparison is cheaper than hashing them into a set.
        let fields = head.fields
        for i in fields.indices {
            for j in fields.indices where j > i && fields[i].name == fields[j].name {
                return .failure(.duplicateHeaders)
            }
        }
        let text = String(Substring(token))
        let hasUppercase = token.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "F") }
        return .success(RoutedPush(deviceToken: hasUppercase ? text.lowercased() : text))
    }

    /// Header values and payload. `topicRequired` is true with token authentication; `apnsIDIsValid` is
    /// whether the request's `apns-id` (if any) is a UUID (``requestAPNSID(_:)`` checked it already).
    static func validate(
        _ head: PushRequestHead,
        routed: RoutedPush,
        topicRequired: Bool,
        apnsIDIsValid: Bool,
        body: ByteBuffer?,
        bodyLength: Int
    ) -> Result<ValidatedPush, APNSReason> {
        let topic = head.topic
        let pushType = head.pushType
        if topicRequired && (topic?.isEmpty ?? true) { return .failure(.missingTopic) }
        if let topic, topic.isEmpty || topic.utf8.count > 255 || topic.utf8.contains(UInt8(ascii: " ")) {
            return .failure(.badTopic)
        }
        if let pushType, !knownPushTypes.contains(pushType) { return .failure(.invalidPushType) }
        if let topic {
            // VoIP pushes go to `<bundle>.voip` and only VoIP pushes do (see docs/apns-simulator.md).
            let voipTopic = topic.hasSuffix(".voip")
            if let pushType, (pushType == "voip") != voipTopic {
                return .failure(.invalidPushType)
            }
        }
        if let priority = head.priority, priority != "10", priority != "5", priority != "1" {
            return .failure(.badPriority)
        }
        if let expiration = head.expiration,
            expiration.isEmpty || expiration.utf8.count > 12 || !expiration.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
        {
            return .failure(.badExpirationDate)
        }
        if head.apnsID != nil, !apnsIDIsValid { return .failure(.badMessageID) }
        if let collapse = head.collapseID, collapse.utf8.count > 64 { return .failure(.badCollapseID) }
        if bodyLength == 0 { return .failure(.payloadEmpty) }
        let limit = pushType == "voip" ? voipPayloadLimit : payloadLimit
        if bodyLength > limit { return .failure(.payloadTooLarge) }
        // APNs documents no reason for malformed JSON; PayloadEmpty ("no usable payload") is the closest.
        guard let body, let payload = body.withUnsafeReadableBytes({ bytes -> String? in
            JSONSyntax.isObject(bytes) ? String(validating: bytes, as: UTF8.self) : nil
        }) else { return .failure(.payloadEmpty) }

        var record: [(name: String, value: String)] = []
        record.reserveCapacity(head.fields.count + 1)
        for field in head.fields where field.name.hasPrefix("apns-") || field.name == "content-type" {
            record.append((field.name, field.value))
        }
        return .success(ValidatedPush(deviceToken: routed.deviceToken, recordHeaders: record, payload: payload))
    }
}
