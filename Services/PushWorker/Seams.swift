import APNs
import CallContract
import Foundation

/// One ring push the worker asks a push service to deliver: an APNs VoIP push to an iPhone, or an
/// FCM high-priority data message to an Android phone (``platform``).
public struct VoIPPush: Sendable, Hashable {
    /// Key into the worker's app configuration (bundle id, credentials).
    public var app: String
    public var deviceToken: String
    /// The push service: APNs (`ios`) or FCM (`android`).
    public var platform: DevicePlatform
    /// iOS: the APNs environment of the token; nil for Android.
    public var environment: APNSEnvironment?
    public var apnsID: String
    /// iOS: `apns-expiration`; Android: `android.ttl` is the time left to it. The ring deadline.
    public var expiration: Date
    /// iOS: the VoIP payload JSON.
    public var payload: Data
    /// Android: the FCM data message (``VoIPPayload/fcmData()``).
    public var data: [String: String]
    /// Android: `android.collapse_key` (the call id).
    public var collapseKey: String
    /// The attempt must be answered by then (the worker passes the ring deadline, capped by its timeout).
    public var deadline: Date

    /// The time left to ``deadline`` (whole milliseconds), the bound a sender gives its client;
    /// nil once the deadline has passed (nothing is sent).
    public var timeLeft: Duration? {
        let remaining = deadline.timeIntervalSinceNow
        return remaining > 0 ? .milliseconds(Int64(remaining * 1000)) : nil
    }

    /// An APNs VoIP push to an iPhone.
    public init(app: String, deviceToken: String, environment: APNSEnvironment, apnsID: String,
                expiration: Date, payload: Data, deadline: Date) {
        self.app = app
        self.deviceToken = deviceToken
        self.platform = .ios
        self.environment = environment
        self.apnsID = apnsID
        self.expiration = expiration
        self.payload = payload
        self.data = [:]
        self.collapseKey = ""
        self.deadline = deadline
    }

    /// An FCM data message to an Android phone.
    public init(app: String, fcmToken: String, data: [String: String], collapseKey: String, expiration: Date, deadline: Date) {
        self.app = app
        self.deviceToken = fcmToken
        self.platform = .android
        self.environment = nil
        self.apnsID = ""
        self.expiration = expiration
        self.payload = Data()
        self.data = data
        self.collapseKey = collapseKey
        self.deadline = deadline
    }
}

/// What one push attempt came to, as the worker needs it (the APNs and FCM adapters map their
/// client's typed outcome to this, FCM's onto the same dispositions).
public struct PushAttempt: Sendable, Hashable {
    /// What to do next (reference/apns.md's classification, as the APNs client reports it).
    public typealias Disposition = APNSDisposition

    public var disposition: Disposition
    /// HTTP status, nil when no response arrived.
    public var status: Int?
    /// Apple's reason verbatim, or a transport code (`timeout`, `connection-lost`, …).
    public var reason: String?
    public var apnsID: String?
    public var uniqueID: String?
    public var timestamp: Date?
    /// A floor for the next retry's delay (e.g. after 429).
    public var minimumRetryDelay: Duration
    /// Set when FCM answered (Android): what the status carries as `fcm` instead of `apns`.
    public var fcm: CallStatus.FCMDetails?
    /// From sending the push to its answer, when the sender measured it (a push sent with others
    /// is answered before the last of them).
    public var latency: Duration?

    public init(disposition: Disposition, status: Int? = nil, reason: String? = nil, apnsID: String? = nil,
                uniqueID: String? = nil, timestamp: Date? = nil, minimumRetryDelay: Duration = .zero,
                fcm: CallStatus.FCMDetails? = nil, latency: Duration? = nil) {
        self.disposition = disposition
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.uniqueID = uniqueID
        self.timestamp = timestamp
        self.minimumRetryDelay = minimumRetryDelay
        self.fcm = fcm
        self.latency = latency
    }

    /// The status's `apns` (nil for an FCM answer, which goes to `fcm`).
    var details: CallStatus.APNSDetails? {
        guard fcm == nil else { return nil }
        return .init(id: apnsID, uniqueId: uniqueID, status: status, reason: reason, timestamp: timestamp)
    }
}

/// Sends ring pushes (``PlatformPushSender`` over the APNs and FCM clients in production, a fake in tests).
public protocol VoIPPushSending: Sendable {
    /// Sends one push; never throws, never hangs past `push.deadline`. After `ExpiredProviderToken`
    /// the sender has renewed the token itself (the APNs client does, at most once per token; the
    /// FCM client renews its access token on a 401 inside one send).
    func send(_ push: VoIPPush) async -> PushAttempt
    /// Sends several pushes at once and reports each push's attempt through `answered` (its index
    /// in `pushes`, the attempt as `send(_:)` would make it) as soon as that push is answered, from
    /// whichever task answered it; returns once every push was answered (each within its own
    /// deadline), each exactly once. The default sends them concurrently, one `send(_:)` each.
    func send(_ pushes: [VoIPPush], answered: @escaping @Sendable (Int, PushAttempt) -> Void) async
}

extension VoIPPushSending {
    public func send(_ pushes: [VoIPPush], answered: @escaping @Sendable (Int, PushAttempt) -> Void) async {
        if pushes.count == 1 {
            answered(0, await send(pushes[0]))
            return
        }
        await withTaskGroup(of: Void.self) { group in
            for (index, push) in pushes.enumerated() {
                group.addTask {
                    let start = ContinuousClock.now
                    var attempt = await self.send(push)
                    if attempt.latency == nil { attempt.latency = ContinuousClock.now - start }
                    answered(index, attempt)
                }
            }
        }
    }
}

/// Where the worker's outcomes go (Kafka in production). Each call returns once the record is
/// durable (acknowledged by the broker) or throws; with a `bound`, it throws once the bound has
/// passed without an acknowledgement (the record may still be stored).
public protocol OutcomePublishing: Sendable {
    /// Writes a status to the status topic, into partition `partition` (the request's partition number).
    func publish(status: CallStatus, partition: Int32, within bound: Duration?) async throws
    /// The same with record headers (the trace context, `traceparent` / `tracestate`).
    func publish(status: CallStatus, partition: Int32, headers: [(String, String)], within bound: Duration?) async throws
    /// Writes the original request bytes to the DLQ with the contract's headers.
    func deadLetter(key: [UInt8]?, value: [UInt8], headers: [(String, String)], within bound: Duration?) async throws
    /// Writes several statuses in one go (no bound); one result per status, in order: success once
    /// that record is acknowledged, or the error it failed with (to `classify`). The default writes
    /// them concurrently, one `publish` each.
    func publish(statuses: [StatusRecord]) async -> [Result<Void, any Error>]
    /// How to treat `error`, thrown by `publish` or `deadLetter`.
    func classify(_ error: any Error) -> OutcomeWriteFailure
}

/// One status to write with others (`OutcomePublishing.publish(statuses:)`).
public struct StatusRecord: Sendable {
    public var status: CallStatus
    /// The request's partition number: the status goes to the same one of the status topic.
    public var partition: Int32
    /// Record headers (the trace context).
    public var headers: [(String, String)]

    public init(status: CallStatus, partition: Int32, headers: [(String, String)] = []) {
        self.status = status
        self.partition = partition
        self.headers = headers
    }
}

extension OutcomePublishing {
    public func classify(_ error: any Error) -> OutcomeWriteFailure { .retriable }

    public func publish(statuses: [StatusRecord]) async -> [Result<Void, any Error>] {
        await withTaskGroup(of: (Int, Result<Void, any Error>).self) { group in
            for (index, record) in statuses.enumerated() {
                group.addTask {
                    do {
                        try await self.publish(status: record.status, partition: record.partition, headers: record.headers, within: nil)
                        return (index, .success(()))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var results = Array(repeating: Result<Void, any Error>.failure(StatusWriteBatcher.noResult), count: statuses.count)
            for await (index, result) in group { results[index] = result }
            return results
        }
    }

    /// A publisher that keeps no headers writes the status without them.
    public func publish(status: CallStatus, partition: Int32, headers: [(String, String)], within bound: Duration?) async throws {
        try await publish(status: status, partition: partition, within: bound)
    }
}

/// How the worker treats a failed outcome write.
public enum OutcomeWriteFailure: Sendable, Hashable {
    /// Try again: the broker is unavailable, a bound ran out, the producer is being replaced.
    case retriable
    /// The record will never be accepted (too large, no such partition, not authorized): the
    /// delivery ends another way (`DeliveryProcessor` documents which).
    case permanent(code: String)
}
