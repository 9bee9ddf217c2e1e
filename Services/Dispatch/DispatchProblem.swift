import CallContract
import Foundation

/// An HTTP error answer of the dispatch API, rendered as RFC 9457 `application/problem+json`:
/// `{"type": "https://callpush.dev/problems/<code>", "title", "status", "detail", "field"?}`.
///
/// `code` is stable (clients may switch on it); `field` names the failing JSON field
/// (`devices[1].token`) when one is at fault. `retryAfter` becomes a `Retry-After` header.
public struct DispatchProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable problem codes.
    public struct Code: RawRepresentable, Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { self.rawValue = value }
        public var description: String { rawValue }

        public static let malformedJSON: Code = "malformed-json"
        public static let missingField: Code = "missing-field"
        public static let wrongType: Code = "wrong-type"
        public static let invalidValue: Code = "invalid-value"
        public static let unknownApp: Code = "unknown-app"
        public static let payloadTooLarge: Code = "payload-too-large"
        public static let tooManyDevices: Code = "too-many-devices"
        public static let bodyTooLarge: Code = "body-too-large"
        public static let notFound: Code = "not-found"
        public static let unauthorized: Code = "unauthorized"
        public static let forbidden: Code = "forbidden"
        public static let rateLimited: Code = "rate-limited"
        public static let conflict: Code = "idempotency-conflict"
        public static let unavailable: Code = "kafka-unavailable"
        public static let internalError: Code = "internal"
    }

    public var code: Code
    /// HTTP status code.
    public var status: Int
    /// Short, fixed summary of the problem type.
    public var title: String
    /// This occurrence, in words (never a key, token or secret).
    public var detail: String
    /// JSON path of the failing field, if one is at fault.
    public var field: String?
    /// Seconds for a `Retry-After` header (429, 503).
    public var retryAfter: Int?

    public init(_ code: Code, status: Int, title: String, detail: String, field: String? = nil, retryAfter: Int? = nil) {
        self.code = code
        self.status = status
        self.title = title
        self.detail = detail
        self.field = field
        self.retryAfter = retryAfter
    }

    /// Whether a client may retry the same request later (429, 503).
    public var isRetryable: Bool { status == 429 || status == 503 }

    public var description: String { "\(status) \(code.rawValue): \(field.map { "\($0): " } ?? "")\(detail)" }

    /// The problem+json document.
    public var json: Data {
        var object: [String: Any] = [
            "type": "https://callpush.dev/problems/\(code.rawValue)", "title": title, "status": status, "detail": detail,
        ]
        if let field { object["field"] = field }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
    }

    /// A contract validation error (the field is already a JSON path such as `devices[0].token`).
    public static func contract(_ error: ContractError) -> DispatchProblem {
        let code: Code
        switch error.code {
        case .malformedJSON: code = .malformedJSON
        case .missingField: code = .missingField
        case .wrongType: code = .wrongType
        case .payloadTooLarge: code = .payloadTooLarge
        case .invalidValue, .unknownType: code = .invalidValue
        }
        let title = code == .malformedJSON ? "Malformed JSON" : "Invalid request"
        return DispatchProblem(code, status: 400, title: title,
                               detail: error.description, field: error.path.isEmpty ? nil : error.path)
    }

    public static func invalid(_ field: String, _ detail: String, code: Code = .invalidValue, status: Int = 400) -> DispatchProblem {
        DispatchProblem(code, status: status, title: "Invalid request", detail: "\(field): \(detail)", field: field)
    }

    public static func bodyTooLarge(limit: Int) -> DispatchProblem {
        DispatchProblem(.bodyTooLarge, status: 413, title: "Request body too large", detail: "the body exceeds \(limit) bytes")
    }

    public static func notFound(_ callId: String) -> DispatchProblem {
        DispatchProblem(.notFound, status: 404, title: "Unknown call", detail: "no call \(callId) is known to this dispatch instance", field: "callId")
    }

    public static let missingKey = DispatchProblem(.unauthorized, status: 401, title: "Unauthorized",
                                                   detail: "an API key is required: Authorization: Bearer <key>")
    public static let badKey = DispatchProblem(.unauthorized, status: 401, title: "Unauthorized", detail: "the API key is not valid")
    public static let badAckToken = DispatchProblem(.forbidden, status: 403, title: "Forbidden",
                                                    detail: "the ack token does not match this call and device", field: "ackToken")

    public static func rateLimited(retryAfter: Int) -> DispatchProblem {
        DispatchProblem(.rateLimited, status: 429, title: "Too many requests",
                        detail: "this API key's rate limit is exhausted", retryAfter: retryAfter)
    }

    public static func unavailable(retryAfter: Int, detail: String) -> DispatchProblem {
        DispatchProblem(.unavailable, status: 503, title: "Kafka did not acknowledge in time", detail: detail, retryAfter: retryAfter)
    }

    public static func conflict(_ callId: String) -> DispatchProblem {
        DispatchProblem(.conflict, status: 409, title: "callId reused with a different request",
                        detail: "call \(callId) was already requested with a different body", field: "callId")
    }
}
