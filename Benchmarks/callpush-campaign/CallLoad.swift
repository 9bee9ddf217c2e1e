import CallContract
import Foundation
import Locking

/// Rings calls through dispatch (`POST /v1/calls`) at a steady rate and remembers what dispatch
/// answered: accepted (202, with the deliveries it promised), refused (503: the client was told)
/// or anything else.
final class CallLoad: Sendable {
    /// One call the load rang.
    struct Call: Sendable {
        var callId: String
        /// Device token → device key, for every device of the call.
        var devices: [String: String]
        var requestedAt: ContinuousClock.Instant
        var wallClock: Date
        var answer: Answer
    }

    enum Answer: Sendable, Equatable {
        case accepted
        case refused(Int)
        case failed(String)
    }

    private let stack: Stack
    private let calls = Locked<[Call]>([])
    let ringTimeoutSeconds: Int

    init(stack: Stack, ringTimeoutSeconds: Int) {
        self.stack = stack
        self.ringTimeoutSeconds = ringTimeoutSeconds
    }

    var snapshot: [Call] { calls.withLock { $0 } }

    /// Rings `count` calls at `rate` per second; every tenth call has two devices. Each call is
    /// its own task, so a slow answer (Kafka down) never slows the ticker.
    func ring(count: Int, rate: Double) async {
        let interval = Duration.seconds(1.0 / rate)
        var next = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask { await self.ringOne(index: index) }
                next = next.advanced(by: interval)
                try? await Task.sleep(until: next)
            }
        }
    }

    private func ringOne(index: Int) async {
        let callId = UUID().uuidString.lowercased()
        let tokens = (0..<(index % 10 == 9 ? 2 : 1)).map { _ in CampaignFiles.randomHex(32) }
        let body: [String: Any] = [
            "callId": callId, "app": CampaignFiles.app,
            "devices": tokens.map { ["token": $0, "environment": "sandbox"] },
            "caller": ["handle": "campaign-\(index)", "displayName": "Campaign Caller"],
            "ringTimeoutSeconds": ringTimeoutSeconds,
            "attributes": ["index": "\(index)"],
        ]
        let requestedAt = ContinuousClock.now
        let wallClock = Date()
        var devices: [String: String] = [:]
        for token in tokens { devices[token] = DeviceKey.make(token: token) }
        let answer: Answer
        do {
            let data = try JSONSerialization.data(withJSONObject: body)
            let response = try await stack.http.send("POST", "\(stack.dispatchURL)/v1/calls", body: data,
                                                     headers: ["Authorization": "Bearer \(stack.files.apiKey)"])
            switch response.status {
            case 202:
                // The answer must be about this call: a 202 naming another call would make this one
                // look accepted (and then lost) while its own request was refused.
                let named = (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any])?["callId"] as? String
                answer = named == callId ? .accepted : .failed("202 names call \(named ?? "none"), not \(callId)")
            case 503: answer = .refused(503)
            default: answer = .failed("HTTP \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))")
            }
        } catch {
            answer = .failed("\(error)")
        }
        let call = Call(callId: callId, devices: devices, requestedAt: requestedAt, wallClock: wallClock, answer: answer)
        calls.withLock { $0.append(call) }
    }
}
