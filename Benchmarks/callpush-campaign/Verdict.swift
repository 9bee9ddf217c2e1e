import CallContract
import Foundation

/// The outside checks of a run: what dispatch accepted against the statuses on Kafka, the
/// pushes the simulator recorded, the DLQ and the processes' exits.
struct Verdict: Sendable {
    var calls = 0
    var accepted = 0
    var refused = 0
    var otherAnswers: [String] = []
    var deliveries = 0
    var lost: [String] = []
    /// Call ids of the lost deliveries.
    var lostCallIDs: Set<String> = []
    var conflicting: [String] = []
    /// Status history of every accepted delivery whose outcome is not `sent` (written to outcomes.txt).
    var notSent: [String] = []
    var outcomes: [String: Int] = [:]
    /// `duplicate` statuses: redelivered events the workers recognised and did not push again.
    var redeliveriesRecognised = 0
    var duplicates = 0
    var duplicateReasons: [String: Int] = [:]
    var invalid = 0
    var deadLettered = 0
    var missingFromDLQ: [String] = []
    var crashes: [String] = []
    var latenciesMs: [Double] = []

    var p99Ms: Double {
        guard !latenciesMs.isEmpty else { return -1 }
        let sorted = latenciesMs.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))]
    }

    var failed: Bool {
        !lost.isEmpty || !missingFromDLQ.isEmpty || !crashes.isEmpty || !conflicting.isEmpty || accepted == 0 || !misdirected.isEmpty
    }
    /// 202 answers that named another call than the one requested (dispatch or the HTTP client mixed answers up).
    var misdirected: [String] { otherAnswers.filter { $0.contains("202 names call") } }

    /// Terminal outcomes of one delivery: terminal worker statuses except `duplicate` (a redelivery
    /// the worker recognised; it sends nothing).
    static func outcomes(_ statuses: [CallStatus]) -> [CallStatus] {
        statuses.filter { $0.state.isTerminal && $0.state != .duplicate && !$0.state.isDeviceReport }
    }

    /// Checks every accepted delivery; `true` when all have a terminal outcome.
    static func allSettled(_ calls: [CallLoad.Call], _ collector: OutcomeCollector) -> Bool {
        calls.allSatisfy { call in
            call.answer != .accepted || call.devices.values.allSatisfy {
                !outcomes(collector.statuses(callId: call.callId, deviceKey: $0)).isEmpty
            }
        }
    }

    mutating func checkCalls(_ calls: [CallLoad.Call], collector: OutcomeCollector) {
        self.calls = calls.count
        for call in calls {
            switch call.answer {
            case .accepted: accepted += 1
            case .refused: refused += 1; continue
            case .failed(let why): otherAnswers.append("\(call.callId): \(why)"); continue
            }
            for deviceKey in call.devices.values {
                deliveries += 1
                let all = collector.statuses(callId: call.callId, deviceKey: deviceKey)
                redeliveriesRecognised += all.filter { $0.state == .duplicate }.count
                let terminal = Self.outcomes(all)
                guard let first = terminal.first else {
                    lostCallIDs.insert(call.callId)
                    let history = all.map { "\($0.state.rawValue)#\($0.attempt)@\($0.worker)" }.joined(separator: " ")
                    lost.append("\(call.callId)/\(deviceKey.prefix(8)) requests \(collector.requestPositions(callId: call.callId).joined(separator: ","))"
                                + " statuses [\(history)]")
                    continue
                }
                outcomes[first.state.rawValue, default: 0] += 1
                if first.state != .sent {
                    let history = collector.statuses(callId: call.callId, deviceKey: deviceKey).map { status in
                        "\(status.state.rawValue)#\(status.attempt)@\(status.worker)"
                            + (status.apns?.reason.map { "(\($0))" } ?? "") + (status.error.map { "[\($0.code)]" } ?? "")
                    }
                    notSent.append("\(call.callId) requested \(call.wallClock): " + history.joined(separator: " "))
                }
                if Set(terminal.map(\.state)).count > 1 {
                    conflicting.append("\(call.callId)/\(deviceKey.prefix(8)) requested \(call.wallClock): "
                        + all.map { "\($0.state.rawValue)#\($0.attempt)@\($0.worker) at \($0.at)" }.joined(separator: ", "))
                }
                if let sent = collector.firstSent(callId: call.callId, deviceKey: deviceKey) {
                    latenciesMs.append((sent - call.requestedAt).seconds * 1000)
                }
            }
        }
    }

    /// Counts pushes per device token at the simulator; a second push for a token is a duplicate.
    /// Every worker run signs with its own key, so the JWT's `kid` tells which run pushed:
    /// the same run twice is a retry after a lost answer (timeout, dropped connection after APNs
    /// accepted); two runs is a redelivery whose first `sent` was not durable (after a SIGKILL, or
    /// after a partition moved in a rebalance).
    mutating func checkPushes(_ pushes: [SimulatorPush], calls: [CallLoad.Call], killTimes: [Date]) {
        var known = Set<String>()
        for call in calls { known.formUnion(call.devices.keys) }
        let byToken = Dictionary(grouping: pushes.filter { known.contains($0.deviceToken.lowercased()) }) { $0.deviceToken.lowercased() }
        for (_, list) in byToken where list.count > 1 {
            let sorted = list.sorted { $0.receivedAt < $1.receivedAt }
            duplicates += list.count - 1
            for (earlier, later) in zip(sorted, sorted.dropFirst()) {
                let cause: String
                if earlier.signingKey == later.signingKey {
                    cause = "same-worker-retry-after-lost-answer"
                } else if killTimes.contains(where: { $0 >= earlier.receivedAt.addingTimeInterval(-1) && $0 <= later.receivedAt }) {
                    cause = "other-worker-after-sigkill"
                } else {
                    cause = "other-worker-after-rebalance"
                }
                duplicateReasons[cause, default: 0] += 1
            }
        }
    }

    var summaryLine: String {
        let dlq = "\(invalid - missingFromDLQ.count)/\(invalid)"
        return "calls=\(calls) accepted=\(accepted) refused=\(refused) other=\(otherAnswers.count) faults=\(faultCount) lost=\(lost.count) "
            + "duplicates=\(duplicates) dlq=\(dlq) p99_ms=\(Int(p99Ms.rounded())) crashed=\(crashes.count)"
    }

    var faultCount = 0
}

/// A push the simulator recorded (the fields the campaign needs).
struct SimulatorPush: Sendable, Decodable {
    var deviceToken: String
    var receivedAt: Date
    var connectionID: Int?
    var headers: [String: String]?

    /// The `kid` of the JWT the push was signed with (the simulator records `bearer <redacted kid=…>`).
    var signingKey: String {
        guard let authorization = headers?["authorization"], let range = authorization.range(of: "kid=") else { return "?" }
        return String(authorization[range.upperBound...].prefix { $0 != ">" && $0 != " " })
    }

    static func decodeList(_ data: Data) throws -> [SimulatorPush] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            if let date = formatter.date(from: text) { return date }
            formatter.formatOptions = [.withInternetDateTime]
            if let date = formatter.date(from: text) { return date }
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "bad date \(text)"))
        }
        if let list = try? decoder.decode([SimulatorPush].self, from: data) { return list }
        struct Wrapped: Decodable { var pushes: [SimulatorPush] }
        return try decoder.decode(Wrapped.self, from: data).pushes
    }
}
