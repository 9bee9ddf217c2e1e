import Foundation
import NIOCore
import Testing

@testable import APNs

@Suite struct APNSReasonTests {
    /// apns.md's table: reason → (status, disposition).
    static let table: [(String, Int, APNSDisposition)] = [
        ("BadDeviceToken", 400, .tokenDead), ("DeviceTokenNotForTopic", 400, .tokenDead),
        ("BadCollapseId", 400, .requestInvalid), ("BadExpirationDate", 400, .requestInvalid),
        ("BadMessageId", 400, .requestInvalid), ("BadPriority", 400, .requestInvalid),
        ("BadTopic", 400, .requestInvalid), ("DuplicateHeaders", 400, .requestInvalid),
        ("IdleTimeout", 400, .retry), ("InvalidPushType", 400, .requestInvalid),
        ("MissingDeviceToken", 400, .requestInvalid), ("MissingTopic", 400, .requestInvalid),
        ("PayloadEmpty", 400, .requestInvalid), ("TopicDisallowed", 400, .requestInvalid),
        ("ExpiredProviderToken", 403, .renewTokenAndRetry),
        ("BadCertificate", 403, .credentialsInvalid), ("BadCertificateEnvironment", 403, .credentialsInvalid),
        ("Forbidden", 403, .credentialsInvalid), ("InvalidProviderToken", 403, .credentialsInvalid),
        ("MissingProviderToken", 403, .credentialsInvalid), ("UnrelatedKeyIdInToken", 403, .credentialsInvalid),
        ("BadEnvironmentKeyIdInToken", 403, .credentialsInvalid), ("BadEnvironmentKeyInToken", 403, .credentialsInvalid),
        ("BadPath", 404, .requestInvalid), ("MethodNotAllowed", 405, .requestInvalid),
        ("Unregistered", 410, .tokenDead), ("ExpiredToken", 410, .tokenDead),
        ("PayloadTooLarge", 413, .requestInvalid),
        ("TooManyRequests", 429, .retry), ("TooManyProviderTokenUpdates", 429, .retry),
        ("InternalServerError", 500, .retry),
        ("ServiceUnavailable", 503, .retry), ("Shutdown", 503, .retry),
    ]

    @Test func everyReasonInTheTableMapsToItsStatusAndClass() {
        #expect(Self.table.count == APNSReason.allKnown.count)
        for (raw, status, disposition) in Self.table {
            let reason = APNSReason(rawValue: raw)
            #expect(reason != .unknown(raw), "\(raw) must be a known case")
            #expect(reason.rawValue == raw)
            #expect(reason.expectedStatus == status, "\(raw)")
            #expect(APNSDisposition.classify(status: status, reason: reason) == disposition, "\(raw)")
        }
    }

    @Test func unknownReasonsSurviveVerbatimAndAreClassifiedByStatus() {
        let reason = APNSReason(rawValue: "SomethingNew42")
        #expect(reason == .unknown("SomethingNew42"))
        #expect(reason.rawValue == "SomethingNew42")
        #expect(APNSDisposition.classify(status: 503, reason: reason) == .retry)
        #expect(APNSDisposition.classify(status: 410, reason: reason) == .tokenDead)
        #expect(APNSDisposition.classify(status: 403, reason: reason) == .credentialsInvalid)
        #expect(APNSDisposition.classify(status: 400, reason: reason) == .requestInvalid)
        #expect(APNSDisposition.classify(status: 200, reason: nil) == .sent)
    }

    @Test func errorBodyGivesReasonAndMillisecondTimestamp() {
        let body = ByteBuffer(string: #"{"reason":"Unregistered","timestamp":1700000000123}"#)
        let (reason, timestamp) = APNSClient.parseErrorBody(body)
        #expect(reason == .unregistered)
        #expect(timestamp == Date(timeIntervalSince1970: 1_700_000_000.123))
        let outcome = APNSOutcome(status: 410, reason: reason, apnsID: nil, uniqueID: nil, timestamp: timestamp, latency: .zero, attempts: 1)
        #expect(outcome.disposition == .tokenDead)
        #expect(outcome.code == "Unregistered")

        let (unknown, _) = APNSClient.parseErrorBody(ByteBuffer(string: #"{"reason":"BrandNewReason"}"#))
        #expect(unknown == .unknown("BrandNewReason"))
        let (none, noTime) = APNSClient.parseErrorBody(ByteBuffer(string: "not json"))
        #expect(none == nil && noTime == nil)
    }

    @Test func transportErrorsAreRetryableOutcomesWithStableCodes() {
        for code in [APNSError.Code.timeout, .connectionLost, .refusedStream, .tlsFailure, .connectFailed] {
            let outcome = APNSOutcome(error: APNSError(code, "x"), apnsID: nil, latency: .zero, attempts: 1)
            #expect(outcome.disposition == .retry)
            #expect(outcome.code == code.rawValue)
        }
        let tooLarge = APNSOutcome(error: APNSError(.payloadTooLarge, "x"), apnsID: nil, latency: .zero, attempts: 0)
        #expect(tooLarge.disposition == .requestInvalid)
        #expect(APNSError(.payloadTooLarge, "x").isFatal)
        #expect(APNSError(.connectionLost, "x").wasNotSent == false)
        #expect(APNSError(.refusedStream, "x").wasNotSent)
    }

    @Test func aFailureWithAppleReasonFromAGoAwayTakesThatReasonAndItsDisposition() {
        let wrongEnvironment = APNSOutcome(
            error: APNSError(.refusedStream, "GOAWAY", reason: .badCertificateEnvironment), apnsID: nil, latency: .zero, attempts: 1)
        #expect(wrongEnvironment.code == "BadCertificateEnvironment")
        #expect(wrongEnvironment.reason == .badCertificateEnvironment)
        #expect(wrongEnvironment.disposition == .credentialsInvalid)
        #expect(wrongEnvironment.error?.wasNotSent == true)
        #expect(wrongEnvironment.error?.isRetryable == false)
        let shutdown = APNSOutcome(error: APNSError(.refusedStream, "GOAWAY", reason: .shutdown), apnsID: nil, latency: .zero, attempts: 16)
        #expect(shutdown.disposition == .retry && shutdown.code == "Shutdown")
        // An unknown reason is kept verbatim; the error code decides what to do.
        let unknown = APNSOutcome(error: APNSError(.connectFailed, "GOAWAY", reason: .unknown("Brand")), apnsID: nil, latency: .zero, attempts: 1)
        #expect(unknown.disposition == .retry && unknown.code == "Brand")
    }
}

@Suite struct APNSGoAwayDebugDataTests {
    @Test func goAwayReasonIsReadFromDebugData() {
        #expect(APNSConnectionHandler.reason(fromDebugData: ByteBuffer(string: #"{"reason":"Shutdown"}"#)) == "Shutdown")
        #expect(APNSConnectionHandler.reason(fromDebugData: ByteBuffer(string: #"{ "reason" : "IdleTimeout" }"#)) == "IdleTimeout")
        #expect(APNSConnectionHandler.reason(fromDebugData: ByteBuffer(string: "plain text")) == "plain text")
        #expect(APNSConnectionHandler.reason(fromDebugData: ByteBuffer()) == nil)
    }
}
