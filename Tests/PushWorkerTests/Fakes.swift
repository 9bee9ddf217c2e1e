import CallContract
import CallpushCore
import CallpushTestSupport
import Foundation
import Logging
import Locking
@testable import PushWorker

/// An APNs stand-in that answers from a script (per device token) and records every attempt.
final class ScriptedSender: VoIPPushSending {
    struct Sent: Sendable { var push: VoIPPush; var at: Date }
    private let state = Locked<(script: [String: [PushAttempt]], sent: [Sent])>(([:], []))
    let fallback: PushAttempt
    let latency: Duration
    /// The clock that stamps each attempt (the processor's, when a test judges deadlines on it).
    let now: @Sendable () -> Date

    init(fallback: PushAttempt = PushAttempt(disposition: .sent, status: 200), latency: Duration = .zero,
         now: @escaping @Sendable () -> Date = { Date() }) {
        self.fallback = fallback
        self.latency = latency
        self.now = now
    }

    /// Answers the next attempts for `token` with `outcomes` in order, then the fallback.
    func script(_ token: String, _ outcomes: [PushAttempt]) {
        state.withLock { $0.script[token, default: []].append(contentsOf: outcomes) }
    }

    func send(_ push: VoIPPush) async -> PushAttempt {
        if latency > .zero { try? await Task.sleep(for: latency) }
        let at = now()
        return state.withLock { state in
            state.sent.append(Sent(push: push, at: at))
            guard var queue = state.script[push.deviceToken], !queue.isEmpty else { return fallback }
            let next = queue.removeFirst()
            state.script[push.deviceToken] = queue
            return next
        }
    }

    var sent: [Sent] { state.withLock { $0.sent } }
}

/// A Kafka stand-in recording statuses and DLQ records; can fail the first N writes.
final class RecordingPublisher: OutcomePublishing {
    struct DeadLetter: Sendable { var key: [UInt8]?; var value: [UInt8]; var headers: [String: String] }
    private let state = Locked<(statuses: [(CallStatus, Int32)], dlq: [DeadLetter], failuresLeft: Int, headers: [[String: String]])>(([], [], 0, []))

    init(failFirst: Int = 0) { state.withLock { $0.failuresLeft = failFirst } }

    /// Writes succeed from now on.
    func heal() { state.withLock { $0.failuresLeft = 0 } }

    struct Unavailable: Error {}

    func publish(status: CallStatus, partition: Int32, within bound: Duration?) async throws {
        try await publish(status: status, partition: partition, headers: [], within: bound)
    }

    func publish(status: CallStatus, partition: Int32, headers: [(String, String)], within bound: Duration?) async throws {
        try state.withLock { state in
            if state.failuresLeft > 0 { state.failuresLeft -= 1; throw Unavailable() }
            state.statuses.append((status, partition))
            state.headers.append(Dictionary(headers, uniquingKeysWith: { a, _ in a }))
        }
    }

    /// The headers of every status written (cancel markers included), in order.
    var statusHeaders: [[String: String]] { state.withLock { $0.headers } }

    func deadLetter(key: [UInt8]?, value: [UInt8], headers: [(String, String)], within bound: Duration?) async throws {
        try state.withLock { state in
            if state.failuresLeft > 0 { state.failuresLeft -= 1; throw Unavailable() }
            state.dlq.append(DeadLetter(key: key, value: value, headers: Dictionary(headers, uniquingKeysWith: { a, _ in a })))
        }
    }

    /// Delivery statuses (call-level cancel markers apart, see `cancelMarkers`).
    var statuses: [CallStatus] { state.withLock { $0.statuses.map(\.0) }.filter { !$0.isCancelMarker } }
    var partitions: [Int32] { state.withLock { $0.statuses.filter { !$0.0.isCancelMarker }.map(\.1) } }
    var deadLetters: [DeadLetter] { state.withLock { $0.dlq } }
    var states: [CallStatus.State] { statuses.map(\.state) }
    /// The call-level `cancelled` statuses written for processed cancels.
    var cancelMarkers: [CallStatus] { state.withLock { $0.statuses.map(\.0) }.filter(\.isCancelMarker) }
}

let testSecret = Array(repeating: UInt8(42), count: 32)

struct Harness {
    let sender: ScriptedSender
    let publisher: RecordingPublisher
    let processor: DeliveryProcessor

    init(sender: ScriptedSender = ScriptedSender(), publisher: RecordingPublisher = RecordingPublisher(),
         retry: RetryPolicy = RetryPolicy(base: .milliseconds(5), cap: .milliseconds(20), maxAttempts: 8, minimumRemaining: .milliseconds(5)),
         credentials: CredentialCircuit = CredentialCircuit(), outcomeWriteBound: Duration = .seconds(10),
         now: @escaping @Sendable () -> Date = { Date() },
         logger: Logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })) {
        self.sender = sender
        self.publisher = publisher
        var settings = DeliveryProcessor.Settings(workerID: "test-worker", apps: ["rider", "taxi"], androidApps: ["rider"], retry: retry,
                                                  attemptTimeout: TestTiming.scaled(.seconds(2)))
        settings.outcomeWriteBound = outcomeWriteBound
        self.processor = DeliveryProcessor(
            settings: settings,
            sender: sender, publisher: publisher, cancels: CancelSignals(),
            dedupe: PartitionDedupe(retention: .seconds(60), capacity: 10_000),
            ackTokens: try! AckTokenSigner(secret: testSecret), credentials: credentials, logger: logger, now: now)
    }

    func process(_ request: CallRequest, partition: Int32 = 3, offset: Int64 = 100) async throws -> DeliveryResult {
        let value = Array(try request.encoded())
        return await processor.process(InboundEvent(partition: partition, offset: offset, key: Array(request.callId.utf8), value: value))
    }
}

func makeRing(token: String = String(repeating: "ab", count: 32), callId: String = CallID.make(),
              ringsFor seconds: Double = TestTiming.scaled(seconds: 30), replay: Int = 0, app: String = "rider") -> RingRequest {
    let now = ContractCoding.truncatedToMilliseconds(Date())
    return RingRequest(callId: callId, app: app, device: Device(token: token, environment: .sandbox, id: "dev-1"),
                       caller: Caller(handle: "driver-1", displayName: "Driver"), requestedAt: now.addingTimeInterval(-60),
                       ringDeadline: now.addingTimeInterval(seconds), attributes: ["rideId": "R-1"], replay: replay)
}

/// An FCM registration token (mixed case, `:`, `-`, `_`), distinct per seed.
func fcmToken(_ seed: Int) -> String {
    "eT\(seed)q-Z_4:APA91b" + String(repeating: "Lm7_Kq-R", count: 18)
}

/// A ring for an Android phone.
func makeAndroidRing(token: String = fcmToken(1), callId: String = CallID.make(), ringsFor seconds: Double = TestTiming.scaled(seconds: 30),
                     app: String = "rider") -> RingRequest {
    var ring = makeRing(callId: callId, ringsFor: seconds, app: app)
    ring.device = Device(fcmToken: token, id: "pixel-1")
    return ring
}

extension PushAttempt {
    static let fcmSent = PushAttempt(disposition: .sent, status: 200, fcm: .init(name: "projects/p/messages/1", status: 200))
    static let fcmUnregistered = PushAttempt(disposition: .tokenDead, status: 404, reason: "UNREGISTERED",
                                             fcm: .init(status: 404, errorCode: "UNREGISTERED"))
    static let fcmSenderMismatch = PushAttempt(disposition: .credentialsInvalid, status: 403, reason: "SENDER_ID_MISMATCH",
                                               fcm: .init(status: 403, errorCode: "SENDER_ID_MISMATCH"))
}

/// A clock the test moves by hand.
typealias ManualClock = SettableClock

extension PushAttempt {
    static let ok = PushAttempt(disposition: .sent, status: 200, apnsID: "id")
    static let unavailable = PushAttempt(disposition: .retry, status: 503, reason: "ServiceUnavailable")
    static let unregistered = PushAttempt(disposition: .tokenDead, status: 410, reason: "Unregistered",
                                          timestamp: Date(timeIntervalSince1970: 1_795_262_000))
    static let invalidProviderToken = PushAttempt(disposition: .credentialsInvalid, status: 403, reason: "InvalidProviderToken")
    static let expiredProviderToken = PushAttempt(disposition: .renewTokenAndRetry, status: 403, reason: "ExpiredProviderToken")
}
