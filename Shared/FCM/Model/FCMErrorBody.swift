import Foundation

/// FCM's error answer: a `google.rpc.Status` under `error`, whose `details` may hold an
/// `FcmError` (`errorCode`) and a `google.rpc.BadRequest` (`fieldViolations`).
///
/// ```json
/// {"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND",
///   "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "UNREGISTERED"}]}}
/// ```
struct FCMErrorBody: Sendable {
    static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    static let badRequestType = "type.googleapis.com/google.rpc.BadRequest"

    var errorCode: FCMErrorCode?
    var rpcStatus: String?
    var message: String?
    /// The `field`s of `google.rpc.BadRequest.fieldViolations`.
    var violatedFields: [String] = []

    /// Whether the answer blames the registration token (`message.token`).
    var tokenViolation: Bool {
        violatedFields.contains { $0 == "message.token" || $0 == "token" }
            || (errorCode == .invalidArgument && violatedFields.isEmpty
                && (message?.localizedCaseInsensitiveContains("registration token") ?? false))
    }

    private struct Wire: Decodable {
        struct Status: Decodable {
            var code: Int?
            var message: String?
            var status: String?
            var details: [Detail]?
        }
        struct Detail: Decodable {
            var type: String?
            var errorCode: String?
            var fieldViolations: [Violation]?
            enum CodingKeys: String, CodingKey {
                case type = "@type"
                case errorCode, fieldViolations
            }
        }
        struct Violation: Decodable {
            var field: String?
            var description: String?
        }
        var error: Status?
    }

    /// Parses an error body; `nil` when it is not a `google.rpc.Status` answer.
    init?(_ bytes: some Collection<UInt8>) {
        guard !bytes.isEmpty, let wire = try? JSONDecoder().decode(Wire.self, from: Data(bytes)), let status = wire.error
        else { return nil }
        rpcStatus = status.status
        message = status.message.map { String($0.prefix(300)) }
        for detail in status.details ?? [] {
            switch detail.type {
            case Self.fcmErrorType?:
                if let code = detail.errorCode { errorCode = FCMErrorCode(rawValue: code) }
            case Self.badRequestType?:
                violatedFields += (detail.fieldViolations ?? []).compactMap(\.field)
            default:
                continue
            }
        }
    }
}

/// The `Retry-After` header: delay seconds or an HTTP date (RFC 9110 §10.2.3), clamped to 0…1 hour.
enum RetryAfter {
    static let maximum: Duration = .seconds(3600)

    static func parse(_ value: String?, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Double(value), seconds.isFinite {
            return clamp(seconds)
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return clamp(date.timeIntervalSince(now))
    }

    private static func clamp(_ seconds: Double) -> Duration {
        let bounded = min(max(seconds, 0), 3600)
        return .milliseconds(Int64((bounded * 1000).rounded()))
    }
}
