import APNs
import CallContract
import Foundation
import Locking

/// The worker's APNs seam in production: sends through ``APNSClient`` and maps its typed outcome
/// to what the delivery engine needs.
public struct APNsPushSender: VoIPPushSending {
    public let client: APNSClient

    public init(client: APNSClient) {
        self.client = client
    }

    public func send(_ push: VoIPPush) async -> PushAttempt {
        let remaining = push.deadline.timeIntervalSinceNow
        guard remaining > 0 else {
            return PushAttempt(disposition: .retry, reason: "deadline-passed", apnsID: push.apnsID)
        }
        let request = APNSVoIPPush(
            app: APNSAppID(push.app), deviceToken: push.deviceToken,
            environment: push.environment == .production ? .production : .sandbox,
            payload: push.payload, expiration: .at(push.expiration),
            apnsID: UUID(uuidString: push.apnsID) ?? UUID.randomVersion4(),
            timeout: .milliseconds(Int64(remaining * 1000)))
        let outcome = await client.send(request)
        return PushAttempt(
            disposition: outcome.disposition,
            status: outcome.status,
            reason: outcome.status == 200 ? nil : outcome.code,
            apnsID: outcome.apnsID,
            uniqueID: outcome.uniqueID,
            timestamp: outcome.timestamp,
            minimumRetryDelay: outcome.status == 429 ? .seconds(1) : .zero)
    }
}
