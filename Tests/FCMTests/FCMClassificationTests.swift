@testable import FCM
import Foundation
import Testing

@Suite("FCM answers: error body parsing and classification")
struct FCMClassificationTests {
    static func body(_ status: Int, _ rpc: String, code: String?, field: String? = nil, message: String = "m") -> [UInt8] {
        var details: [String] = []
        if let code { details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(code)"}"#) }
        if let field {
            details.append(#"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"\#(field)","description":"d"}]}"#)
        }
        return Array(#"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(rpc)","details":[\#(details.joined(separator: ","))]}}"#.utf8)
    }

    @Test("FCM's documented answers map to the worker's dispositions", arguments: [
        (404, "NOT_FOUND", "UNREGISTERED" as String?, nil as String?, FCMDisposition.tokenDead),
        (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "message.token", .tokenDead),
        (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "message.android.ttl", .requestInvalid),
        (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", nil, .requestInvalid),
        (403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", nil, .credentialsInvalid),
        (401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", nil, .credentialsInvalid),
        (401, "UNAUTHENTICATED", nil, nil, .credentialsInvalid),
        (403, "PERMISSION_DENIED", nil, nil, .credentialsInvalid),
        (429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", nil, .retry),
        (503, "UNAVAILABLE", "UNAVAILABLE", nil, .retry),
        (500, "INTERNAL", "INTERNAL", nil, .retry),
        (502, "UNKNOWN", nil, nil, .retry),
        (404, "NOT_FOUND", nil, nil, .requestInvalid),
        (400, "INVALID_ARGUMENT", nil, "message.data[0].value", .requestInvalid),
    ])
    func classify(_ status: Int, _ rpc: String, _ code: String?, _ field: String?, _ expected: FCMDisposition) throws {
        let parsed = try #require(FCMErrorBody(Self.body(status, rpc, code: code, field: field)))
        #expect(parsed.rpcStatus == rpc)
        #expect(parsed.errorCode?.rawValue == code)
        let outcome = FCMOutcome(
            status: status, errorCode: parsed.errorCode, rpcStatus: parsed.rpcStatus, errorMessage: parsed.message,
            tokenViolation: parsed.tokenViolation, messageName: nil, retryAfter: nil, latency: .zero, attempts: 1)
        #expect(outcome.disposition == expected)
        #expect(outcome.code == (code ?? rpc))
    }

    @Test("unknown codes are kept verbatim and classified by status")
    func unknownCode() throws {
        let parsed = try #require(FCMErrorBody(Self.body(503, "UNAVAILABLE", code: "BRAND_NEW_CODE")))
        #expect(parsed.errorCode == .unknown("BRAND_NEW_CODE"))
        #expect(FCMDisposition.classify(status: 503, errorCode: parsed.errorCode, tokenViolation: false) == .retry)
        #expect(FCMDisposition.classify(status: 410, errorCode: parsed.errorCode, tokenViolation: false) == .requestInvalid)
        for code in FCMErrorCode.allKnown { #expect(FCMErrorCode(rawValue: code.rawValue) == code) }
    }

    @Test("a body that is not google.rpc.Status parses to nothing (the status decides)")
    func notJSON() {
        #expect(FCMErrorBody(Array("<html>502 Bad Gateway</html>".utf8)) == nil)
        #expect(FCMErrorBody([UInt8]()) == nil)
        #expect(FCMDisposition.classify(status: 502, errorCode: nil, tokenViolation: false) == .retry)
    }

    @Test("Retry-After: seconds or an HTTP date, clamped to 0...3600 s")
    func retryAfter() {
        let now = Date(timeIntervalSince1970: 1_784_000_000)
        #expect(RetryAfter.parse("30", now: now) == .seconds(30))
        #expect(RetryAfter.parse("1.5", now: now) == .milliseconds(1500))
        #expect(RetryAfter.parse("-4", now: now) == .zero)
        #expect(RetryAfter.parse("99999", now: now) == .seconds(3600))
        #expect(RetryAfter.parse("soon", now: now) == nil)
        #expect(RetryAfter.parse(nil, now: now) == nil)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        #expect(RetryAfter.parse(formatter.string(from: now.addingTimeInterval(120)), now: now) == .seconds(120))
    }

    @Test("local and transport errors: dispositions and whether the message may have gone out")
    func errorDispositions() {
        #expect(FCMError(.tokenUnavailable, "").disposition == .retry)
        #expect(FCMError(.tokenUnavailable, "").wasNotSent)
        #expect(FCMError(.tokenRefused, "").disposition == .credentialsInvalid)
        #expect(FCMError(.timeout, "").disposition == .retry)
        #expect(!FCMError(.timeout, "").wasNotSent)
        #expect(!FCMError(.connectionLost, "").wasNotSent)
        #expect(FCMError(.connectFailed, "").wasNotSent)
        #expect(FCMError(.queueFull, "").isRetryable)
        #expect(FCMError(.unknownApp, "").disposition == .requestInvalid)
    }
}
