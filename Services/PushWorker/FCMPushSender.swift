import CallContract
import FCM
import Foundation

/// The worker's FCM seam in production: sends an Android ring as an FCM high-priority data message
/// through ``FCMClient`` and maps its typed outcome onto the dispositions the delivery engine uses
/// for APNs (so dedupe, retries, the credential circuit, statuses and the DLQ are the same code).
public struct FCMPushSender: VoIPPushSending {
    public let client: FCMClient

    public init(client: FCMClient) {
        self.client = client
    }

    public func send(_ push: VoIPPush) async -> PushAttempt {
        guard let timeLeft = push.timeLeft else {
            return PushAttempt(disposition: .retry, reason: FCMError.Code.deadlinePassed.rawValue,
                               fcm: .init(errorCode: FCMError.Code.deadlinePassed.rawValue))
        }
        // The message's deadline is the ring deadline (its TTL is the time left to it); the attempt's
        // own bound is the timeout.
        let message = FCMMessage(app: FCMAppID(push.app), token: push.deviceToken, data: push.data,
                                 collapseKey: push.collapseKey, deadline: push.expiration,
                                 timeout: timeLeft)
        return Self.attempt(await client.send(message))
    }

    /// An FCM outcome as the delivery engine reads it: the same five dispositions as APNs', FCM's
    /// error code as the reason (`UNREGISTERED` goes to the DLQ as `callpush-error`), `Retry-After`
    /// as the floor of the next retry's delay.
    static func attempt(_ outcome: FCMOutcome) -> PushAttempt {
        let code = outcome.isSent ? nil : outcome.code
        return PushAttempt(
            disposition: disposition(outcome.disposition),
            status: outcome.status,
            reason: code,
            minimumRetryDelay: outcome.retryAfter ?? (outcome.status == 429 ? .seconds(1) : .zero),
            fcm: .init(name: outcome.messageName, status: outcome.status, errorCode: code))
    }

    static func disposition(_ disposition: FCMDisposition) -> PushAttempt.Disposition {
        switch disposition {
        case .sent: .sent
        case .retry: .retry
        case .tokenDead: .tokenDead
        case .requestInvalid: .requestInvalid
        case .credentialsInvalid: .credentialsInvalid
        }
    }
}

/// Sends each push through its platform's sender: APNs for iOS devices, FCM for Android ones.
/// A worker without credentials for a platform has no sender for it; the delivery processor
/// rejects such rings before they get here (an app's platforms are in its `Settings`).
public struct PlatformPushSender: VoIPPushSending {
    public let apns: (any VoIPPushSending)?
    public let fcm: (any VoIPPushSending)?

    public init(apns: (any VoIPPushSending)?, fcm: (any VoIPPushSending)?) {
        self.apns = apns
        self.fcm = fcm
    }

    public func send(_ push: VoIPPush) async -> PushAttempt {
        switch push.platform {
        case .ios:
            guard let apns else { return Self.notConfigured(push) }
            return await apns.send(push)
        case .android:
            guard let fcm else { return Self.notConfigured(push) }
            return await fcm.send(push)
        }
    }

    /// Each platform's pushes go to its sender in one call, both platforms at once; each answer is
    /// passed on as its sender reports it (a platform without a sender answers at once).
    public func send(_ pushes: [VoIPPush], answered: @escaping @Sendable (Int, PushAttempt) -> Void) async {
        var ios: [Int] = []
        var android: [Int] = []
        for (index, push) in pushes.enumerated() {
            if push.platform == .ios { ios.append(index) } else { android.append(index) }
        }
        @Sendable func batch(_ sender: (any VoIPPushSending)?, _ indices: [Int]) async {
            guard !indices.isEmpty else { return }
            guard let sender else {
                for index in indices { answered(index, Self.notConfigured(pushes[index])) }
                return
            }
            await sender.send(indices.map { pushes[$0] }) { position, attempt in answered(indices[position], attempt) }
        }
        if ios.isEmpty || android.isEmpty {
            await batch(apns, ios)
            await batch(fcm, android)
        } else {
            async let fromFCM: Void = batch(fcm, android)
            await batch(apns, ios)
            await fromFCM
        }
    }

    static func notConfigured(_ push: VoIPPush) -> PushAttempt {
        PushAttempt(disposition: .requestInvalid, reason: "platform-not-configured")
    }
}
