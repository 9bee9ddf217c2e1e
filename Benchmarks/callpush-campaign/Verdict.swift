import CallContract
import Foundation
import Locking

/// The outside checks of a run: what dispatch accepted against the statuses on Kafka, the
/// pushes the APNs simulator and the messages the FCM simulator recorded, the DLQ and the
/// processes' exits. Deliveries, lost ones, outcomes and duplicates are also counted per platform
/// (the device's: iPhone or Android phone); a lost Android delivery fails the run like an iPhone's.
struct Verdict: Sendable {
    typealias Platform = CallLoad.Platform

    var calls = 0
    var accepted = 0
    var refused = 0
    var otherAnswers: [String] = []
    var deliveries = 0
    var lost: [String] = []
    var deliveriesBy: [Platform: Int] = [:]
    var lostBy: [Platform: Int] = [:]
    var outcomesBy: [Platform: [String: Int]] = [:]
    var duplicatesBy: [Platform: Int] = [:]
    /// Call ids of the lost deliveries.
    var lostCallIDs: Set<String> = []
    /// Deliveries of calls the embedded cluster never stored although librdkafka acknowledged their
    /// event (implicitly, without an offset, after an earlier request failed uncertainly): a broker
    /// that checks idempotent sequence numbers stores them (docs/kafka.md). Reported, not failed.
    var unstoredByCluster: [String] = []
    var conflicting: [String] = []
    /// Status history of every accepted delivery whose outcome is not `sent` (written to outcomes.txt).
    var notSent: [String] = []
    var outcomes: [String: Int] = [:]
    /// `duplicate` statuses: redelivered events the workers recognised and did not push again.
    var redeliveriesRecognised = 0
    var duplicates = 0
    var duplicateReasons: [String: Int] = [:]
    /// One line per device pushed more than once: the pushes' times and signing keys.
    var duplicateDetails: [String] = []
    var invalid = 0
    var deadLettered = 0
    var missingFromDLQ: [String] = []
    var crashes: [String] = []
    var latenciesMs: [Double] = []
    /// Pushes the simulator accepted for a cancelled call after dispatch accepted its cancel.
    var rungAfterCancel: [String] = []
    /// Deliveries that ended `expired` without any push attempt by the worker that ended them.
    var expiredUnowned: [String] = []
    /// Longest POST → first push at a simulator of a regular call, outside that simulator's fault windows.
    var maxRingMs: Double = -1
    /// Rings measured for ``maxRingMs`` and those left out because a fault window of their simulator overlapped.
    /// The ring behind ``maxRingMs``: call, request time, push time and signing key.
    var slowestRing = ""
    var ringsMeasured = 0
    var ringsInFaultWindows = 0
    /// Production deliveries refused because of the app's sandbox credential trouble (must be none).
    var productionRefused: [String] = []
    /// Findings about the faults' own calls that are reported, not judged.
    var expectations: [String] = []
    /// Whether `expired_unowned > 0` fails the run (`--long`).
    var expiredUnownedFails = false

    var p99Ms: Double {
        guard !latenciesMs.isEmpty else { return -1 }
        let sorted = latenciesMs.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))]
    }

    var failed: Bool {
        !lost.isEmpty || !missingFromDLQ.isEmpty || !crashes.isEmpty || !conflicting.isEmpty || accepted == 0 || !misdirected.isEmpty
            || !rungAfterCancel.isEmpty || !productionRefused.isEmpty || (expiredUnownedFails && !expiredUnowned.isEmpty)
    }
    /// 202 answers that named another call than the one requested (dispatch or the HTTP client mixed answers up).
    var misdirected: [String] { otherAnswers.filter { $0.contains("202 names call") } }

    /// Terminal outcomes of one delivery in replay generation `replay`: terminal worker statuses
    /// except `duplicate` (a redelivery the worker recognised; it sends nothing).
    static func outcomes(_ statuses: [CallStatus], replay: Int) -> [CallStatus] {
        statuses.filter { $0.replay == replay && $0.state.isTerminal && $0.state != .duplicate && !$0.state.isDeviceReport }
    }

    /// Checks every accepted delivery (and the replays the campaign made); `true` when all have a terminal outcome.
    static func allSettled(_ calls: [CallLoad.Call], replayed: [FaultPlan.Doomed] = [], _ collector: OutcomeCollector) -> Bool {
        let original = calls.allSatisfy { call in
            call.answer != .accepted || call.devices.values.allSatisfy {
                !outcomes(collector.statuses(callId: call.callId, deviceKey: $0), replay: 0).isEmpty
            }
        }
        return original && replayed.allSatisfy { call in
            call.tokens.allSatisfy { token in
                let statuses = collector.statuses(callId: call.callId, deviceKey: DeviceKey.make(token: token))
                return outcomes(statuses, replay: 0).first?.state != .failed || !outcomes(statuses, replay: 1).isEmpty
            }
        }
    }

    static func history(_ statuses: [CallStatus]) -> String {
        statuses.map { status in
            "\(status.state.rawValue)#\(status.attempt)r\(status.replay)@\(status.worker)"
                + (status.apns?.reason.map { "(\($0))" } ?? "") + (status.error.map { "[\($0.code)]" } ?? "")
        }.joined(separator: " ")
    }

    mutating func checkCalls(_ calls: [CallLoad.Call], collector: OutcomeCollector) {
        self.calls = calls.count
        for call in calls {
            switch call.answer {
            case .accepted: accepted += 1
            case .refused: refused += 1; continue
            case .failed(let why): otherAnswers.append("\(call.callId): \(why)"); continue
            }
            for (token, deviceKey) in call.devices {
                let platform = call.platform(of: token)
                deliveries += 1
                deliveriesBy[platform, default: 0] += 1
                let all = collector.statuses(callId: call.callId, deviceKey: deviceKey)
                redeliveriesRecognised += all.filter { $0.state == .duplicate }.count
                checkGenerations(call: call, deviceKey: deviceKey, statuses: all)
                let terminal = Self.outcomes(all, replay: 0)
                guard let first = terminal.first else {
                    lostCallIDs.insert(call.callId)
                    lostBy[platform, default: 0] += 1
                    lost.append("\(call.callId)/\(deviceKey.prefix(8)) (\(platform.rawValue)) requests \(collector.requestPositions(callId: call.callId).joined(separator: ","))"
                                + " statuses [\(Self.history(all))]")
                    continue
                }
                outcomes[first.state.rawValue, default: 0] += 1
                outcomesBy[platform, default: [:]][first.state.rawValue, default: 0] += 1
                if first.state != .sent {
                    notSent.append("\(call.callId) (\(call.kind)) requested \(call.wallClock): " + Self.history(all))
                }
                let production = platform == .ios && !call.sandboxTokens.contains(token)
                if production, first.state == .failed,
                   first.error?.code == "app-suspended" || first.apns?.reason == "BadEnvironmentKeyInToken" {
                    productionRefused.append("\(call.callId)/\(deviceKey.prefix(8)): " + Self.history(all))
                }
                switch call.kind {
                case .cancelledFirst where first.state != .cancelled:
                    expectations.append("cancelled before its ring, yet \(first.state.rawValue): \(call.callId) " + Self.history(all))
                case .mismatched where call.sandboxTokens.contains(token) && first.state != .failed:
                    expectations.append("sandbox device the key is not valid for, yet \(first.state.rawValue): \(call.callId) " + Self.history(all))
                default:
                    break
                }
                if let sent = collector.firstSent(callId: call.callId, deviceKey: deviceKey), first.state == .sent {
                    latenciesMs.append((sent - call.requestedAt).inSeconds * 1000)
                }
            }
        }
    }

    /// Per replay generation of one delivery: conflicting outcomes, and expiries without any attempt.
    private mutating func checkGenerations(call: CallLoad.Call, deviceKey: String, statuses: [CallStatus]) {
        for replay in Set(statuses.map(\.replay)).sorted() {
            let terminal = Self.outcomes(statuses, replay: replay)
            if Set(terminal.map(\.state)).count > 1 {
                conflicting.append("\(call.callId)/\(deviceKey.prefix(8)) r\(replay) requested \(call.wallClock): "
                    + statuses.map { "\($0.state.rawValue)#\($0.attempt)r\($0.replay)@\($0.worker) at \($0.at)" }.joined(separator: ", "))
            }
            // Its worker began it after the ring deadline: for the whole ring window no worker was
            // working on its partition.
            if let first = terminal.first, first.state == .expired, first.attempt == 0 {
                expiredUnowned.append("\(call.callId)/\(deviceKey.prefix(8)) r\(replay) requested \(call.wallClock): " + Self.history(statuses))
            }
        }
    }

    /// The doomed calls whose replay ran: the replay must ring the ones not cancelled (replay
    /// generation 1 `sent`) and answer `cancelled` for the cancelled ones.
    mutating func checkReplays(_ replayed: [FaultPlan.Doomed], cancels: [String: Date], collector: OutcomeCollector) {
        for call in replayed {
            for token in call.tokens {
                let deviceKey = DeviceKey.make(token: token)
                let all = collector.statuses(callId: call.callId, deviceKey: deviceKey)
                guard Self.outcomes(all, replay: 0).first?.state == .failed else {
                    expectations.append("doomed call not failed, so not replayed: \(call.callId) " + Self.history(all))
                    continue
                }
                let expected: CallStatus.State = cancels[call.callId] == nil ? .sent : .cancelled
                guard let first = Self.outcomes(all, replay: 1).first else {
                    lostCallIDs.insert(call.callId)
                    lostBy[call.platform, default: 0] += 1
                    lost.append("\(call.callId)/\(deviceKey.prefix(8)) (\(call.platform.rawValue)) replayed from the DLQ: no outcome [\(Self.history(all))]")
                    continue
                }
                if first.state != expected {
                    expectations.append("replayed doomed call \(expected == .sent ? "not cancelled" : "cancelled"), yet \(first.state.rawValue): "
                                        + "\(call.callId) " + Self.history(all))
                }
            }
        }
    }

    /// A push a simulator accepted: an APNs push (token lower-cased, sent by the run whose token
    /// key signed it) or an FCM message (token as is, sent by the run whose service account's
    /// access token authorized it).
    struct Ring: Sendable {
        var token: String
        var receivedAt: Date
        /// The worker run that sent it: its APNs key id or its FCM service account.
        var sender: String
        var platform: Platform
    }

    static func rings(apns: [SimulatorPush], fcm: [FCMPush]) -> [Ring] {
        apns.map { Ring(token: $0.deviceToken.lowercased(), receivedAt: $0.receivedAt, sender: $0.signingKey, platform: .ios) }
            + fcm.map { Ring(token: $0.token, receivedAt: $0.receivedAt, sender: $0.sender, platform: .android) }
    }

    /// Counts pushes per device token at the simulators; a second push for a token is a duplicate.
    /// Every worker run signs with its own APNs key and uses its own FCM service account, so the
    /// JWT's `kid` or the message's account tells which run pushed: the same run twice is a retry
    /// after a lost answer (timeout, dropped connection after the service accepted) when the
    /// delivery has a `retrying` status without an APNs (or FCM) answer, else a redelivery to the
    /// same run; two runs is a redelivery whose first `sent` was not durable or not known to the new
    /// owner (after a SIGKILL, or after a partition moved in a rebalance).
    ///
    /// Also: pushes after an accepted cancel (`rung_after_cancel`) and the longest POST → push of
    /// the regular calls outside the windows of their simulator's faults (`max_ring_ms`).
    mutating func checkPushes(_ pushes: [SimulatorPush], fcmMessages: [FCMPush], calls: [CallLoad.Call], collector: OutcomeCollector,
                              killTimes: [Date], cancels: [String: Date], apnsWindows: [SimulatorFaults.Window],
                              fcmWindows: [SimulatorFaults.Window]) {
        var known = Set<String>()
        for call in calls { known.formUnion(call.devices.keys) }
        let byToken = Dictionary(grouping: Self.rings(apns: pushes, fcm: fcmMessages).filter { known.contains($0.token) }) { $0.token }
        let callOfToken = Dictionary(calls.flatMap { call in call.devices.keys.map { ($0, call.callId) } }, uniquingKeysWith: { first, _ in first })
        for (token, list) in byToken where list.count > 1 {
            let sorted = list.sorted { $0.receivedAt < $1.receivedAt }
            let platform = sorted[0].platform
            duplicates += list.count - 1
            duplicatesBy[platform, default: 0] += list.count - 1
            let statuses = collector.statuses(callId: callOfToken[token] ?? "", deviceKey: DeviceKey.make(token: token))
            duplicateDetails.append("\(callOfToken[token] ?? "?")/\(DeviceKey.make(token: token).prefix(8)) (\(platform.rawValue)): pushed at "
                                    + sorted.map { "\(SimulatorPush.timeFormat($0.receivedAt)) by \($0.sender)" }.joined(separator: ", ")
                                    + "; statuses [\(Self.history(statuses))]")
            // The worker retries an attempt that got no answer (timeout, connection lost, stream reset).
            let answerLost = statuses.contains { status in
                status.state == .retrying && (platform == .ios ? status.apns?.status : status.fcm?.status) == nil
            }
            for (earlier, later) in zip(sorted, sorted.dropFirst()) {
                let cause: String
                if earlier.sender == later.sender {
                    cause = answerLost ? "same-worker-retry-after-lost-answer" : "same-worker-redelivery"
                } else if killTimes.contains(where: { $0 >= earlier.receivedAt.addingTimeInterval(-1) && $0 <= later.receivedAt }) {
                    cause = "other-worker-after-sigkill"
                } else {
                    cause = "other-worker-after-rebalance"
                }
                duplicateReasons[cause, default: 0] += 1
            }
        }
        for call in calls where call.answer == .accepted {
            if let cancelledAt = cancels[call.callId] {
                for token in call.devices.keys {
                    for push in byToken[token] ?? [] where push.receivedAt > cancelledAt {
                        rungAfterCancel.append("\(call.callId) (\(call.kind), \(push.platform.rawValue)): pushed "
                                               + "\(String(format: "%.3f", push.receivedAt.timeIntervalSince(cancelledAt))) s "
                                               + "after its cancel was accepted, sent by \(push.sender)")
                    }
                }
                continue
            }
            guard call.kind == .regular else { continue }
            for token in call.devices.keys {
                guard let first = byToken[token]?.min(by: { $0.receivedAt < $1.receivedAt }) else { continue }
                let windows = first.platform == .ios ? apnsWindows : fcmWindows
                if windows.contains(where: { $0.from <= first.receivedAt && $0.to >= call.wallClock }) {
                    ringsInFaultWindows += 1
                    continue
                }
                ringsMeasured += 1
                let ms = first.receivedAt.timeIntervalSince(call.wallClock) * 1000
                if ms > maxRingMs {
                    maxRingMs = ms
                    slowestRing = "\(call.callId) (\(first.platform.rawValue)) requested \(SimulatorPush.timeFormat(call.wallClock)), "
                        + "pushed \(SimulatorPush.timeFormat(first.receivedAt)) by \(first.sender)"
                }
            }
        }
    }

    /// Moves the lost deliveries of `callId` to ``unstoredByCluster``.
    mutating func attributeLossToCluster(callId: String) {
        let prefix = callId + "/"
        for entry in lost where entry.hasPrefix(prefix) {
            unstoredByCluster.append(entry)
            for platform in Platform.allCases where entry.contains("(\(platform.rawValue))") {
                lostBy[platform, default: 0] -= 1
            }
        }
        lost.removeAll { $0.hasPrefix(prefix) }
        lostCallIDs.remove(callId)
    }

    /// `N (ios a, android b)`.
    private static func byPlatform(_ total: Int, _ counts: [Platform: Int]) -> String {
        "\(total) (" + Platform.allCases.map { "\($0.rawValue) \(counts[$0] ?? 0)" }.joined(separator: ", ") + ")"
    }

    /// One report line per platform: deliveries, lost, duplicates and outcomes.
    var platformLines: [String] {
        Platform.allCases.map { platform in
            "\(platform.rawValue): deliveries=\(deliveriesBy[platform] ?? 0) lost=\(lostBy[platform] ?? 0) "
                + "duplicates=\(duplicatesBy[platform] ?? 0) outcomes: "
                + (outcomesBy[platform] ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
    }

    var summaryLine: String {
        let dlq = "\(invalid - missingFromDLQ.count)/\(invalid)"
        return "calls=\(calls) accepted=\(accepted) refused=\(refused) other=\(otherAnswers.count) faults=\(faultCount) "
            + "lost=\(Self.byPlatform(lost.count, lostBy)) duplicates=\(Self.byPlatform(duplicates, duplicatesBy)) dlq=\(dlq) p99_ms=\(Int(p99Ms.rounded())) crashed=\(crashes.count) "
            + "rung_after_cancel=\(rungAfterCancel.count) expired_unowned=\(expiredUnowned.count) max_ring_ms=\(Int(maxRingMs.rounded()))"
            + " unstored_by_cluster=\(unstoredByCluster.count)"
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

    /// `HH:mm:ss.SSS` (UTC), for report lines.
    static func timeFormat(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss.SSS"
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    /// Reads the simulators' dates: ISO 8601, with or without milliseconds.
    static var decoder: JSONDecoder {
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
        return decoder
    }

    static func decodeList(_ data: Data) throws -> [SimulatorPush] {
        let decoder = Self.decoder
        if let list = try? decoder.decode([SimulatorPush].self, from: data) { return list }
        struct Wrapped: Decodable { var pushes: [SimulatorPush] }
        return try decoder.decode(Wrapped.self, from: data).pushes
    }
}
