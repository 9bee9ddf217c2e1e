import CallContract
import Foundation
import Kafka
import Logging
import ProcessStack
import Locking

/// Rings calls through dispatch (`POST /v1/calls`) and cancels some (`DELETE /v1/calls/{id}`, or,
/// before a call is rung, its cancel event written straight to `voip.call-requests` as a producer
/// other than dispatch may: dispatch answers 404 for a call it does not know yet), remembering what
/// dispatch answered: accepted (202, with the deliveries it promised), refused (503: the client was
/// told) or anything else, and when each cancel was accepted.
final class CallLoad: Sendable {
    /// What the campaign expects of a call.
    enum Kind: Sendable, Equatable {
        /// Production iPhones and Android phones; must ring.
        case regular
        /// Cancelled before its ring was requested; must never ring.
        case cancelledFirst
        /// Its device is refused by its simulator (APNs `BadDeviceToken`, FCM `UNREGISTERED`) until the
        /// campaign lifts the refusal; it fails, is dead-lettered and replayed later (some of them
        /// cancelled first).
        case doomed
        /// A production device and a sandbox device the app's key is not valid for; the production
        /// device must ring.
        case mismatched
    }

    /// A device's platform, as the verdict counts deliveries.
    enum Platform: String, Sendable, CaseIterable {
        case ios, android
    }

    /// One call the load rang.
    struct Call: Sendable {
        var callId: String
        var kind: Kind
        /// Device token → device key, for every device of the call.
        var devices: [String: String]
        /// Tokens of the call's sandbox devices (iPhones; the other iPhones are production devices).
        var sandboxTokens: Set<String>
        /// Tokens of the call's Android phones (FCM registration tokens, case kept).
        var androidTokens: Set<String>
        var requestedAt: ContinuousClock.Instant
        var wallClock: Date
        var answer: Answer

        func platform(of token: String) -> Platform { androidTokens.contains(token) ? .android : .ios }
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
    /// Writes the cancels that precede their call's ring (created on first use).
    private let producer = Locked<KafkaProducer?>(nil)
    let ringTimeoutSeconds: Int

    init(stack: Stack, ringTimeoutSeconds: Int) {
        self.stack = stack
        self.ringTimeoutSeconds = ringTimeoutSeconds
    }

    /// Closes the producer of the cancels, if one was made.
    func shutdown() async {
        await producer.withLock { $0.take() }?.shutdown()
    }

    var snapshot: [Call] { calls.withLock { $0 } }
    var cancelAccepted: [String: Date] { cancels.withLock { $0 } }

    /// Rings `count` calls at `rate` per second, every third with an Android phone: call `i` rings
    /// an Android phone when `i % 6 == 2`, an iPhone and an Android phone when `i % 6 == 5`, else
    /// an iPhone (two when `i % 10 == 9`). Every `cancelEvery`th (if given) is cancelled before it
    /// is rung. Each call is its own task, so a slow answer (Kafka down) never slows the ticker.
    func ring(count: Int, rate: Double, cancelEvery: Int? = nil) async {
        let interval = Duration.seconds(1.0 / rate)
        var next = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask {
                    let (iPhones, androids) = switch index % 6 {
                    case 2: (0, 1)
                    case 5: (1, 1)
                    default: (index % 10 == 9 ? 2 : 1, 0)
                    }
                    let kind: Kind = cancelEvery.map { index % $0 == $0 / 2 } == true ? .cancelledFirst : .regular
                    await self.ringOne(index: index, kind: kind, production: (0..<iPhones).map { _ in StackFiles.randomHex(32) },
                                       sandbox: [], android: (0..<androids).map { _ in Self.fcmToken() },
                                       ringTimeout: self.ringTimeoutSeconds)
                }
                next = next.advanced(by: interval)
                try? await Task.sleep(until: next)
            }
        }
    }

    /// Rings one call of `kind` with the given device tokens (a fault's own calls).
    @discardableResult
    func ring(_ kind: Kind, production: [String] = [], sandbox: [String] = [], android: [String] = [], ringTimeout: Int) async -> Call {
        await ringOne(index: -1, kind: kind, production: production, sandbox: sandbox, android: android, ringTimeout: ringTimeout)
    }

    /// A token shaped like an FCM registration token (`<instance id>:APA91b<…>`, 163 characters of
    /// `A–Z a–z 0–9 - _ :`), random, mixed case as FCM's are.
    static func fcmToken() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        func random(_ count: Int) -> String { String((0..<count).map { _ in alphabet.randomElement()! }) }
        return random(22) + ":APA91b" + random(134)
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

    /// Cancels `callId` before it is rung: its cancel event (no tenant: it cancels the call id of
    /// every tenant) goes straight to `voip.call-requests`, keyed by the call id like dispatch's
    /// events, so it lands in the partition its ring will. True when Kafka acknowledged it.
    func cancelBeforeRing(_ callId: String) async -> Bool {
        let cancel = CancelRequest(callId: callId, requestedAt: ContractCoding.truncatedToMilliseconds(Date()), reason: "campaign")
        guard let event = try? CallRequest.cancel(cancel).encoded() else { return false }
        let producer: KafkaProducer
        do {
            producer = try self.producer.withLock { current throws(KafkaError) -> KafkaProducer in
                if let current { return current }
                var logger = Logger(label: "campaign-cancels")
                logger.logLevel = .critical
                let made = try KafkaProducer(configuration: KafkaProducerConfiguration(
                    kafka: KafkaConfiguration(bootstrapServers: [stack.cluster.bootstrapServers], clientID: "campaign-cancels")), logger: logger)
                current = made
                return made
            }
        } catch {
            return false
        }
        do {
            try await producer.send(KafkaProducerRecord(topic: Topics.requests, key: Array(callId.utf8), value: Array(event)),
                                    timeout: .seconds(5))
        } catch {
            return false
        }
        let acceptedAt = Date()
        cancels.withLock { $0[callId] = acceptedAt }
        return true
    }

    @discardableResult
    private func ringOne(index: Int, kind: Kind, production: [String], sandbox: [String], android: [String] = [],
                         ringTimeout: Int) async -> Call {
        let callId = CallID.make()
        var kind = kind
        if kind == .cancelledFirst, !(await cancelBeforeRing(callId)) { kind = .regular }
        let body: [String: Any] = [
            "callId": callId, "app": Stack.app,
            "devices": production.map { ["token": $0, "environment": "production"] }
                + sandbox.map { ["token": $0, "environment": "sandbox"] }
                + android.map { ["platform": "android", "token": $0] },
            "caller": ["handle": "campaign-\(index)", "displayName": "Campaign Caller"],
            "ringTimeoutSeconds": ringTimeout,
            "attributes": ["index": "\(index)"],
        ]
        let requestedAt = ContinuousClock.now
        let wallClock = Date()
        var devices: [String: String] = [:]
        for token in production + sandbox + android { devices[token] = DeviceKey.make(token: token) }
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
        let call = Call(callId: callId, kind: kind, devices: devices, sandboxTokens: Set(sandbox), androidTokens: Set(android),
                        requestedAt: requestedAt, wallClock: wallClock, answer: answer)
        calls.withLock { $0.append(call) }
        return call
    }
}
