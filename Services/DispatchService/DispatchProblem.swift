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

        // The codes of docs/dispatch.md's table, in its order.
        /// The body is not JSON.
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
        public static let appNotAllowed: Code = "app-not-allowed"
        public static let ackExpired: Code = "ack-expired"
        public static let notReady: Code = "not-ready"
        public static let methodNotAllowed: Code = "method-not-allowed"
        public static let bodyTimeout: Code = "body-timeout"
        public static let unreadableBody: Code = "unreadable-body"
        public static let tooManyStreams: Code = "too-many-streams"
        public static let deviceRateLimited: Code = "device-rate-limited"
    }

    /// Stable machine-readable code (the end of `type`).
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
    /// The `Allow` header of a 405.
    public var allow: String?

    /// A problem answer.
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

    /// 400 naming `field`.
    public static func invalid(_ field: String, _ detail: String, code: Code = .invalidValue, status: Int = 400) -> DispatchProblem {
        DispatchProblem(code, status: status, title: "Invalid request", detail: "\(field): \(detail)", field: field)
    }

    /// 413.
    public static func bodyTooLarge(limit: Int) -> DispatchProblem {
        DispatchProblem(.bodyTooLarge, status: 413, title: "Request body too large", detail: "the body exceeds \(limit) bytes")
    }

    /// 403: the key may not ring this app.
    public static func appNotAllowed(_ app: String) -> DispatchProblem {
        DispatchProblem(.appNotAllowed, status: 403, title: "App not allowed for this key",
                        detail: "this API key may not ring app \"\(app.prefix(64))\"", field: "app")
    }

    /// 403: the ack token's ring deadline plus the grace has passed (or, for a token without a
    /// deadline, this instance does not know the call's).
    public static let ackExpired = DispatchProblem(.ackExpired, status: 403, title: "Ack token expired",
                                                   detail: "the ack token is no longer valid: the call's ring deadline has passed", field: "ackToken")

    /// 503 with `Retry-After`: the status view is still reading its history.
    public static func viewNotReady(retryAfter: Int) -> DispatchProblem {
        DispatchProblem(.notReady, status: 503, title: "Not ready", detail: "the status view is still catching up; retry", retryAfter: retryAfter)
    }

    /// 405 with `Allow`.
    public static func methodNotAllowed(_ method: String, allow: String) -> DispatchProblem {
        var problem = DispatchProblem(.methodNotAllowed, status: 405, title: "Method not allowed",
                                      detail: "\(method.prefix(16)) is not allowed here (allowed: \(allow))")
        problem.allow = allow
        return problem
    }

    /// 404 for a path the API does not have.
    public static let routeNotFound = DispatchProblem(.notFound, status: 404, title: "Not found", detail: "no such resource")

    /// 408: the body did not arrive in time.
    public static func bodyTimeout(_ timeout: Duration) -> DispatchProblem {
        DispatchProblem(.bodyTimeout, status: 408, title: "Request body too slow", detail: "the request body did not arrive within \(timeout)")
    }

    /// 400: the body could not be read (the connection broke while reading it).
    public static let unreadableBody = DispatchProblem(.unreadableBody, status: 400, title: "Unreadable body", detail: "the request body could not be read")

    /// 429 (this key's streams) or 503 (the instance's) with `Retry-After`.
    public static func tooManyStreams(retryAfter: Int, total: Bool) -> DispatchProblem {
        DispatchProblem(.tooManyStreams, status: total ? 503 : 429, title: "Too many event streams",
                        detail: total ? "this instance serves its most event streams" : "this API key has its most event streams open",
                        retryAfter: retryAfter)
    }

    /// 429 with `Retry-After`: this device was rung too often.
    public static func deviceRateLimited(field: String, retryAfter: Int) -> DispatchProblem {
        DispatchProblem(.deviceRateLimited, status: 429, title: "Device rung too often",
                        detail: "\(field): this device was rung too often; retry later", field: field, retryAfter: retryAfter)
    }

    /// 429 for acks with `Retry-After`.
    public static func ackRateLimited(retryAfter: Int) -> DispatchProblem {
        DispatchProblem(.rateLimited, status: 429, title: "Too many requests", detail: "too many acks from this address or for this call",
                        retryAfter: retryAfter)
    }

    /// 404 for a call this instance does not know.
    public static func notFound(_ callId: String) -> DispatchProblem {
        DispatchProblem(.notFound, status: 404, title: "Not found", detail: "no call \(callId) is known to this dispatch instance", field: "callId")
    }

    /// 401: no bearer key.
    public static let missingKey = DispatchProblem(.unauthorized, status: 401, title: "Unauthorized",
                                                   detail: "an API key is required: Authorization: Bearer <key>")
    /// 401: unknown key.
    public static let badKey = DispatchProblem(.unauthorized, status: 401, title: "Unauthorized", detail: "the API key is not valid")
    /// 403: the ack token does not match.
    public static let badAckToken = DispatchProblem(.forbidden, status: 403, title: "Forbidden",
                                                    detail: "the ack token does not match this call and device", field: "ackToken")

    /// 429 with `Retry-After`.
    public static func rateLimited(retryAfter: Int) -> DispatchProblem {
        DispatchProblem(.rateLimited, status: 429, title: "Too many requests",
                        detail: "this API key's rate limit is exhausted", retryAfter: retryAfter)
    }

    /// 503 with `Retry-After`.
    public static func unavailable(retryAfter: Int, detail: String) -> DispatchProblem {
        DispatchProblem(.unavailable, status: 503, title: "Kafka did not acknowledge in time", detail: detail, retryAfter: retryAfter)
    }

    /// 409: callId reused with a different request.
    public static func conflict(_ callId: String) -> DispatchProblem {
        DispatchProblem(.conflict, status: 409, title: "callId reused with a different request",
                        detail: "call \(callId) was already requested with a different body", field: "callId")
    }
}
