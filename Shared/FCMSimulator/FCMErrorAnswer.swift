import Foundation

/// An FCM error answer: `{"error": {"code", "message", "status", "details": [FcmError, BadRequest]}}`
/// (a `google.rpc.Status`).
struct FCMErrorAnswer: Error, Sendable, Equatable {
    var status: Int
    var message: String
    /// The `FcmError` detail's `errorCode`, when FCM sends one.
    var errorCode: String?
    /// `google.rpc.BadRequest.fieldViolations` as (field, description).
    var fieldViolations: [FieldViolation] = []
    var retryAfterSeconds: Int?

    struct FieldViolation: Sendable, Equatable {
        var field: String
        var description: String
    }

    /// The `google.rpc.Code` name of an HTTP status.
    static func rpcStatus(_ status: Int) -> String {
        switch status {
        case 400: "INVALID_ARGUMENT"
        case 401: "UNAUTHENTICATED"
        case 403: "PERMISSION_DENIED"
        case 404: "NOT_FOUND"
        case 409: "ABORTED"
        case 413: "INVALID_ARGUMENT"
        case 429: "RESOURCE_EXHAUSTED"
        case 500: "INTERNAL"
        case 501: "UNIMPLEMENTED"
        case 503: "UNAVAILABLE"
        case 504: "DEADLINE_EXCEEDED"
        default: "UNKNOWN"
        }
    }

    /// FCM's text for an error code.
    static func defaultMessage(_ code: String) -> String {
        switch code {
        case "UNREGISTERED": "Requested entity was not found."
        case "SENDER_ID_MISMATCH": "SenderId mismatch"
        case "QUOTA_EXCEEDED": "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute'."
        case "UNAVAILABLE": "The service is currently unavailable."
        case "INTERNAL": "Internal error encountered."
        case "THIRD_PARTY_AUTH_ERROR": "Auth error from APNS or Web Push Service"
        case "INVALID_ARGUMENT": "Request contains an invalid argument."
        default: "Error \(code)."
        }
    }

    /// A message refused for a bad field: `INVALID_ARGUMENT` with the FcmError detail and the field violation.
    static func invalidArgument(_ field: String, _ description: String) -> FCMErrorAnswer {
        FCMErrorAnswer(
            status: 400, message: description, errorCode: "INVALID_ARGUMENT",
            fieldViolations: [FieldViolation(field: field, description: description)])
    }

    /// A body the proto JSON parser refuses (wrong type, unknown field): `INVALID_ARGUMENT` with only a BadRequest,
    /// like FCM's "Invalid JSON payload received."
    static func invalidJSON(_ field: String, _ description: String) -> FCMErrorAnswer {
        let text = "Invalid JSON payload received. \(description)"
        return FCMErrorAnswer(status: 400, message: text, errorCode: nil, fieldViolations: [FieldViolation(field: field, description: text)])
    }

    /// An injected or configured FCM error.
    static func simulated(_ error: FCMSimulatedError) -> FCMErrorAnswer {
        var answer = FCMErrorAnswer(
            status: error.status, message: error.message ?? defaultMessage(error.errorCode), errorCode: error.errorCode,
            retryAfterSeconds: error.retryAfterSeconds)
        if error.errorCode == "INVALID_ARGUMENT" {
            answer.fieldViolations = [FieldViolation(field: "message.token", description: answer.message)]
        }
        return answer
    }

    /// The JSON body.
    var body: String {
        var details: [[String: Any]] = []
        if let errorCode {
            details.append(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode])
        }
        if !fieldViolations.isEmpty {
            details.append([
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": fieldViolations.map { ["field": $0.field, "description": $0.description] },
            ])
        }
        var error: [String: Any] = ["code": status, "message": message, "status": Self.rpcStatus(status)]
        if !details.isEmpty { error["details"] = details }
        let data = (try? JSONSerialization.data(withJSONObject: ["error": error], options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    /// The code counted in the stats: the FCM error code, else the rpc status.
    var statsCode: String { errorCode ?? Self.rpcStatus(status) }
}
