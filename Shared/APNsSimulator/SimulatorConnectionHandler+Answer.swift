import Foundation
import Locking
import NIOCore
import NIOHPACK

/// The simulator's answer to one request.
struct PushAnswer {
    var status: Int
    var apnsID: String
    var uniqueID: String?
    var reason: String?
    /// For 410: sent as `timestamp` (ms).
    var timestamp: Date?
}

/// Whether and when to answer.
enum PushDecision {
    case respond(PushAnswer, delayNanoseconds: Int64)
    case noResponse
}

extension SimulatorConnectionHandler {
    /// Runs every check and fault in order and records accepted pushes.
    func decide(headers: HPACKHeaders, body: ByteBuffer?, bodyLength: Int, streamID: Int, faults: APNSSimulatorFaults) -> PushDecision {
        if faults.noResponse {
            core.count { $0.unanswered += 1 }
            return .noResponse
        }
        let now = core.clock.now()
        let delay = faults.latency?.sampleNanoseconds(using: &random) ?? 0
        let head = PushRequestHead(headers: headers)
        let requestID = RequestValidator.requestAPNSID(head)
        let apnsID = requestID ?? UUID.randomVersion4(using: &random).lowercasedText

        /// `status` defaults to the one APNs documents for `reason`; injected faults choose their own.
        func reject(_ reason: APNSReason, status: Int? = nil, timestamp: Date? = nil) -> PushDecision {
            core.reject(reason.rawValue)
            let answer = PushAnswer(
                status: status ?? reason.expectedStatus ?? 400, apnsID: apnsID, reason: reason.rawValue, timestamp: timestamp)
            return .respond(answer, delayNanoseconds: delay)
        }

        let routed: RoutedPush
        switch RequestValidator.route(head) {
        case .failure(let reason): return reject(reason)
        case .success(let value): routed = value
        }
        let authentication: Authentication
        switch authenticate(head, now: now) {
        case .failure(let reason): return reject(reason)
        case .success(let value): authentication = value
        }
        let isToken: Bool
        var authorizationRecord: String?
        if case .token(let keyID) = authentication {
            isToken = true
            authorizationRecord = redactedAuthorization(keyID: keyID)
        } else {
            isToken = false
        }
        let push: ValidatedPush
        switch RequestValidator.validate(
            head, routed: routed, topicRequired: isToken, apnsIDIsValid: requestID != nil, body: body, bodyLength: bodyLength
        ) {
        case .failure(let reason): return reject(reason)
        case .success(let value): push = value
        }

        if let outcome = faults.tokenOutcomes[push.deviceToken] {
            if outcome.noResponse {
                core.count { $0.unanswered += 1 }
                return .noResponse
            }
            if outcome.status != 200 {
                return reject(APNSReason(rawValue: outcome.reason), status: outcome.status, timestamp: outcome.status == 410 ? (outcome.timestamp ?? now) : nil)
            }
        }
        if let injection = faults.errorRate, injection.isActive(at: now), injection.probability > 0,
            Double.random(in: 0..<1, using: &random) < injection.probability
        {
            return reject(APNSReason(rawValue: injection.reason), status: injection.status)
        }

        let uniqueID = core.environment == .sandbox ? UUID.randomVersion4(using: &random).lowercasedText : nil
        var recordHeaders = push.recordHeaders
        if let authorizationRecord { recordHeaders.append(("authorization", authorizationRecord)) }
        let record = StoredPush(
            deviceToken: push.deviceToken, headerFields: recordHeaders, payload: push.payload, receivedAt: now,
            apnsID: apnsID, uniqueID: uniqueID, connectionID: id, streamID: streamID
        )
        pendingRecords.append(record)  // into the shared record before the answer is written (`flushOutput`)
        if isToken && core.rampUpConcurrentStreams { authenticatedRequestSucceeded() }
        return .respond(PushAnswer(status: 200, apnsID: apnsID, uniqueID: uniqueID), delayNanoseconds: delay)
    }
}
