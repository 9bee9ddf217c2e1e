import CallContract
import Foundation
import Kafka
import Locking

/// Which dead-lettered records `callpush replay` selects. Every filter given must match.
struct ReplayFilter: Sendable, Hashable {
    /// Failed at or after (the `callpush-failed-at` header, else the record's timestamp).
    var since: Date?
    /// Failed before.
    var until: Date?
    var callId: String?
    var app: String?
    /// The `callpush-error` header (exact).
    var errorCode: String?
}

/// What replay does with one dead-lettered record.
enum ReplayVerdict: Sendable, Equatable {
    /// Publish `ring` (its replay generation already incremented; re-armed if `rearmed`).
    case replay(RingRequest, rearmed: Bool)
    /// A filter does not match.
    case filteredOut
    /// The ring deadline passed and `--new-deadline` was not given.
    case expired
    /// Undecodable or invalid: never replayed.
    case rejected(String)
    /// A valid event that is not a `ring` (a dead-lettered `cancel`): nothing to ring.
    case notRing
    /// The replay generation is already at the contract's maximum.
    case replayLimit
}

/// The pure decision for one record (no I/O), so it is tested without Kafka.
enum ReplayDecision {
    static func decide(_ record: KafkaConsumerMessage, filter: ReplayFilter, newDeadline: Duration?, now: Date) -> ReplayVerdict {
        let failedAt = record.header(DeadLetterHeader.failedAt)?.stringValue.flatMap(ContractCoding.parseTimestamp) ?? record.timestamp
        if let since = filter.since {
            guard let failedAt, failedAt >= since else { return .filteredOut }
        }
        if let until = filter.until {
            guard let failedAt, failedAt < until else { return .filteredOut }
        }
        if let code = filter.errorCode, record.header(DeadLetterHeader.error)?.stringValue != code { return .filteredOut }
        if let callId = filter.callId, let key = record.keyString, key != callId { return .filteredOut }

        let event: CallRequest
        do {
            event = try CallRequest.decode(record.value)
        } catch {
            return .rejected(error.code.rawValue)
        }
        if let callId = filter.callId, event.callId != callId { return .filteredOut }
        guard case .ring(var ring) = event else {
            return filter.app == nil ? .notRing : .filteredOut
        }
        if let app = filter.app, ring.app != app { return .filteredOut }
        guard RingRequest.Limits.replay.contains(ring.replay + 1) else { return .replayLimit }
        ring.replay += 1
        var rearmed = false
        if ring.isExpired(at: now) {
            guard let newDeadline else { return .expired }
            ring.requestedAt = ContractCoding.truncatedToMilliseconds(now)
            ring.ringDeadline = ContractCoding.truncatedToMilliseconds(now.addingTimeInterval(newDeadline.inSeconds))
            rearmed = true
        }
        return .replay(ring, rearmed: rearmed)
    }
}

/// Counts for the progress line and the summary.
struct ReplayCounts: Sendable, Hashable {
    /// Records in the range this run reads (from the start position to the end captured at start).
    var total = 0
    var examined = 0
    var replayed = 0
    var rearmed = 0
    var filteredOut = 0
    var expired = 0
    var rejected = 0
    var notRing = 0
    var replayLimit = 0

    mutating func count(_ verdict: ReplayVerdict) {
        examined += 1
        switch verdict {
        case .replay(_, let wasRearmed):
            replayed += 1
            if wasRearmed { rearmed += 1 }
        case .filteredOut: filteredOut += 1
        case .expired: expired += 1
        case .rejected: rejected += 1
        case .notRing: notRing += 1
        case .replayLimit: replayLimit += 1
        }
    }
}
