import CallContract
import Foundation
import ProcessStack
import Locking

/// Rings calls through dispatch (`POST /v1/calls`) and cancels some (`DELETE /v1/calls/{id}`),
/// remembering what dispatch answered: accepted (202, with the deliveries it promised), refused
/// (503: the client was told) or anything else, and when each cancel was accepted.
final class CallLoad: Sendable {
    /// What the campaign expects of a call.
    enum Kind: Sendable, Equatable {
        /// Production devices; must ring.
        case regular
        /// Cancelled before its ring was requested; must never ring.
        case cancelledFirst
        /// Its devices are refused by the simulator (`BadDeviceToken`) until the campaign lifts the
        /// refusal; it fails, is dead-lettered and replayed later (some of them cancelled first).
        case doomed
        /// A production device and a sandbox device the app's key is not valid for; the production
        /// device must ring.
        case mismatched
    }

    /// One call the load rang.
    struct Call: Sendable {
        var callId: String
        var kind: Kind
        /// Device token → device key, for every device of the call.
        var devices: [String: String]
        /// Tokens of the call's sandbox devices (the rest are production devices).
        var sandboxTokens: Set<String>
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
    /// callId → when dispatch's 202 to its `DELETE` arrived.
    private let cancels = Locked<[String: Date]>([:])
    let ringTimeoutSeconds: Int

    init(stack: Stack, ringTimeoutSeconds: Int) {
        self.stack = stack
        self.ringTimeoutSeconds = ringTimeoutSeconds
    }

    var snapshot: [Call] { calls.withLock { $0 } }
    var cancelAccepted: [String: Date] { cancels.withLock { $0 } }

    /// Rings `count` calls at `rate` per second; every tenth call has two devices, and every
    /// `cancelEvery`th (if given) is cancelled before it is rung. Each call is its own task, so a
    /// slow answer (Kafka down) never slows the ticker.
    func ring(count: Int, rate: Double, cancelEvery: Int? = nil) async {
        let interval = Duration.seconds(1.0 / rate)
        var next = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask {
                    let tokens = (0..<(index % 10 == 9 ? 2 : 1)).map { _ in StackFiles.randomHex(32) }
                    let kind: Kind = cancelEvery.map { index % $0 == $0 / 2 } == true ? .cancelledFirst : .regular
                    await self.ringOne(index: index, kind: kind, production: tokens, sandbox: [], ringTimeout: self.ringTimeoutSeconds)
                }
                next = next.advanced(by: interval)
                try? await Task.sleep(until: next)
            }
        }
    }

    /// Rings one call of `kind` with the given device tokens (a fault's own calls).
    @discardableResult
    func ring(_ kind: Kind, production: [String], sandbox: [String] = [], ringTimeout: Int) async -> Call {
        await ringOne(index: -1, kind: kind, production: production, sandbox: sandbox, ringTimeout: ringTimeout)
    }

    /// Cancels `callId` through dispatch; true when dispatch accepted the cancel (its time is kept).
    @discardableResult
    func cancel(_ callId: String) async -> Bool {
        let response = try? await stack.http.send("DELETE", "\(stack.dispatchURL)/v1/calls/\(callId)",
                                                  body: Data(#"{"reason":"campaign"}"#.utf8),
                                                  headers: ["Authorization": "Bearer \(stack.files.apiKey)"])
        guard response?.status == 202 else { return false }
        let acceptedAt = Date()
        cancels.withLock { $0[callId] = acceptedAt }
        return true
    }

    @discardableResult
    private func ringOne(index: Int, kind: Kind, production: [String], sandbox: [String], ringTimeout: Int) async -> Call {
        let callId = UUID().uuidString.lowercased()
        var kind = kind
        if kind == .cancelledFirst, !(await cancel(callId)) { kind = .regular }
        let body: [String: Any] = [
            "callId": callId, "app": Stack.app,
            "devices": production.map { ["token": $0, "environment": "production"] }
                + sandbox.map { ["token": $0, "environment": "sandbox"] },
            "caller": ["handle": "campaign-\(index)", "displayName": "Campaign Caller"],
            "ringTimeoutSeconds": ringTimeout,
            "attributes": ["index": "\(index)"],
        ]
        let requestedAt = ContinuousClock.now
        let wallClock = Date()
        var devices: [String: String] = [:]
        for token in production + sandbox { devices[token] = DeviceKey.make(token: token) }
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
        let call = Call(callId: callId, kind: kind, devices: devices, sandboxTokens: Set(sandbox),
                        requestedAt: requestedAt, wallClock: wallClock, answer: answer)
        calls.withLock { $0.append(call) }
        return call
    }
}
