import CallContract
import FCMSimulator
import Foundation
import ProcessStack
import Locking

/// FCM outages (the FCM simulator's faults) and the checks that they took effect.
extension FaultPlan {
    /// The FCM simulator's counters.
    func fcmStats() async throws -> FCMSimulatorStats {
        let response = try await stack.http.send("GET", "\(stack.fcmAdminURL)/stats", timeout: 10)
        guard response.status == 200 else { throw StackError("GET /admin/stats of the FCM simulator answered \(response.status)") }
        return try JSONDecoder().decode(FCMSimulatorStats.self, from: response.body)
    }

    /// When an FCM fault has met enough messages: the simulator answered `count` of them with the
    /// error code, or (latency) accepted `count`.
    enum FCMFaultReach: Sendable {
        case rejected(String, Int)
        case accepted(Int)

        func reached(before: FCMSimulatorStats, after: FCMSimulatorStats) -> Int {
            switch self {
            case .rejected(let code, _): (after.rejected[code] ?? 0) - (before.rejected[code] ?? 0)
            case .accepted: after.accepted - before.accepted
            }
        }

        var count: Int {
            switch self {
            case .rejected(_, let count), .accepted(let count): count
            }
        }

        var what: String {
            switch self {
            case .rejected(let code, _): "answered \(code)"
            case .accepted: "accepted (delayed)"
            }
        }
    }

    /// Puts an FCM fault in force for at least `hold` and until it met `until`'s messages, at most
    /// 10 s. Took effect when it met at least one.
    func fcmFault(_ kind: String, _ json: String, hold: Duration, until reach: FCMFaultReach) async {
        await step(kind) {
            let before = try await self.fcmStats()
            let began = ContinuousClock.now
            try await self.fcm.begin(kind, json)
            try await Task.sleep(for: hold)
            var after = try await self.fcmStats()
            while reach.reached(before: before, after: after) < reach.count, ContinuousClock.now - began < .seconds(10) {
                try await Task.sleep(for: .milliseconds(250))
                after = try await self.fcmStats()
            }
            try await self.fcm.end()
            after = try await self.fcmStats()
            let met = reach.reached(before: before, after: after)
            let lasted = String(format: "%.1f", (ContinuousClock.now - began).inSeconds)
            if met > 0 {
                self.note("\(kind) for \(lasted) s: the FCM simulator \(reach.what) \(met) message(s)")
            } else {
                self.problem("\(kind) for \(lasted) s: the FCM simulator \(reach.what) no message: no Android ring was sent meanwhile")
            }
        }
    }

    /// Revokes every access token the FCM simulator issued (the workers' next sends answer 401 and
    /// the FCM client renews its token) while the token endpoint refuses the next 2 grants with 503
    /// (the renewal must be retried). Took effect when sends were answered 401, grants refused and
    /// new tokens issued within `hold`.
    func revokeFCMAccessTokens(hold: Duration) async {
        let kind = "FCM access tokens revoked (401) and the next 2 grants refused (503)"
        await step(kind) {
            let before = try await self.fcmStats()
            try await self.fcm.begin(kind, #"{"tokenEndpoint":{"status":503,"probability":1.0,"count":2}}"#)
            let response = try await self.stack.http.send("DELETE", "\(self.stack.fcmAdminURL)/access-tokens", timeout: 10)
            guard response.status == 204 || response.status == 200 else {
                throw StackError("DELETE /admin/access-tokens answered \(response.status)")
            }
            try await Task.sleep(for: hold)
            try await self.fcm.end()
            let after = try await self.fcmStats()
            let unauthenticated = (after.rejected["UNAUTHENTICATED"] ?? 0) - (before.rejected["UNAUTHENTICATED"] ?? 0)
            let refused = after.tokenRequestsRefused.values.reduce(0, +) - before.tokenRequestsRefused.values.reduce(0, +)
            let issued = after.tokensIssued - before.tokensIssued
            self.note("\(kind): \(unauthenticated) send(s) answered 401, \(refused) grant(s) refused, \(issued) access token(s) issued meanwhile")
            if unauthenticated == 0 { self.problem("\(kind): no send was answered 401: no worker used a revoked token") }
            if issued == 0 { self.problem("\(kind): no access token was issued: no worker renewed its token") }
        }
    }

    /// What the FCM faults were seen to do in the Android statuses and the recorded messages:
    /// deliveries retried after 503 and how they ended; the gap from a 429 (`Retry-After: 1`) to the
    /// next attempt's answer (the retry must wait for it); the gap from a message's arrival to its
    /// `sent` status during the latency windows. Records a problem for one that did not take effect.
    func checkFCMEffects(calls: [CallLoad.Call], messages: [FCMPush]) async -> [String] {
        var lines: [String] = []
        var unavailable = 0, unavailableSent = 0, quotaGaps: [Double] = [], failedRegular: [String] = []
        for call in calls where call.answer == .accepted {
            for token in call.androidTokens {
                let all = collector.statuses(callId: call.callId, deviceKey: DeviceKey.make(token: token))
                let retries = all.filter { $0.state == .retrying }
                if retries.contains(where: { $0.fcm?.errorCode == "UNAVAILABLE" }) {
                    unavailable += 1
                    if Verdict.outcomes(all, replay: 0).first?.state == .sent { unavailableSent += 1 }
                }
                for retry in retries where retry.fcm?.errorCode == "QUOTA_EXCEEDED" {
                    // The next attempt's answer; it cannot come before the Retry-After delay.
                    if let next = all.first(where: { $0.replay == retry.replay && $0.attempt == retry.attempt + 1 && $0.state != .duplicate }) {
                        quotaGaps.append(next.at.timeIntervalSince(retry.at))
                    }
                }
                if call.kind == .regular, let first = Verdict.outcomes(all, replay: 0).first, first.state == .failed {
                    failedRegular.append("\(call.callId): " + Verdict.history(all))
                }
            }
        }
        lines.append("Android deliveries retried after FCM 503: \(unavailable), \(unavailableSent) of them sent")
        if unavailable == 0 { problem("no Android delivery was retried after an FCM 503") }
        if let shortest = quotaGaps.min() {
            lines.append(String(format: "FCM 429 with Retry-After 1 s: %d retries, shortest wait for the next attempt's answer %.2f s", quotaGaps.count, shortest))
            if shortest < 0.95 { problem(String(format: "an Android retry after a 429 with Retry-After 1 s was answered %.2f s later", shortest)) }
        } else {
            problem("no Android delivery was retried after an FCM 429")
        }
        let latencyWindows = await fcm.windows.filter { $0.kind.hasPrefix("FCM latency") }
        var gaps: [Double] = []
        for message in messages where latencyWindows.contains(where: { $0.from <= message.receivedAt && message.receivedAt < $0.to }) {
            guard let callId = message.data["callId"], let deviceKey = message.data["deviceKey"],
                  let sent = collector.statuses(callId: callId, deviceKey: deviceKey).first(where: { $0.state == .sent && $0.fcm?.name == message.name })
            else { continue }
            gaps.append(sent.at.timeIntervalSince(message.receivedAt))
        }
        if gaps.isEmpty {
            problem("no Android ring was sent during the FCM latency window")
        } else {
            let median = gaps.sorted()[gaps.count / 2]
            lines.append(String(format: "FCM latency 300-800 ms: %d Android rings meanwhile, median arrival → sent status %.0f ms", gaps.count, median * 1000))
            if median < 0.3 { problem(String(format: "FCM latency fault: median arrival → sent status %.0f ms, under the 300 ms injected", median * 1000)) }
        }
        if !failedRegular.isEmpty {
            lines.append("regular Android deliveries that ended failed: \(failedRegular.count) (first: \(failedRegular[0]))")
        }
        return lines
    }
}

/// A message the FCM simulator recorded (`GET /admin/messages`; the fields the campaign needs).
struct FCMPush: Sendable, Decodable {
    var token: String
    var name: String
    var data: [String: String]
    /// The service account whose access token sent it: one per worker run (`Stack.fcmAccount`).
    var account: String
    var receivedAt: Date

    /// The worker run's service account, short (`campaign-3`), for report lines.
    var sender: String { String(account.prefix { $0 != "@" }) }

    static func decodeList(_ data: Data) throws -> [FCMPush] {
        try SimulatorPush.decoder.decode([FCMPush].self, from: data)
    }
}
