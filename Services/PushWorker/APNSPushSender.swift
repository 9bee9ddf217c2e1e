import APNs
import CallContract
import Foundation
import Locking

/// The worker's APNs seam in production: sends through ``APNSClient`` and maps its typed outcome
/// to what the delivery engine needs.
public struct APNSPushSender: VoIPPushSending {
    public let client: APNSClient

    public init(client: APNSClient) {
        self.client = client
    }

    public func send(_ push: VoIPPush) async -> PushAttempt {
        guard let request = Self.request(push) else {
            return PushAttempt(disposition: .retry, reason: "deadline-passed", apnsID: push.apnsID)
        }
        return Self.attempt(await client.send(request))
    }

    /// The pushes go to the client in one call (``APNSClient/send(_:answered:)``); each answer is
    /// passed on as the client reports it. A push whose deadline has passed is answered at once
    /// (nothing is sent).
    public func send(_ pushes: [VoIPPush], answered: @escaping @Sendable (Int, PushAttempt) -> Void) async {
        var requests: [APNSVoIPPush] = []
        var positions: [Int] = []
        requests.reserveCapacity(pushes.count)
        positions.reserveCapacity(pushes.count)
        for (index, push) in pushes.enumerated() {
            guard let request = Self.request(push) else {
                answered(index, PushAttempt(disposition: .retry, reason: "deadline-passed", apnsID: push.apnsID))
                continue
            }
            requests.append(request)
            positions.append(index)
        }
        guard !requests.isEmpty else { return }
        await client.send(requests) { [positions] position, outcome in
            answered(positions[position], Self.attempt(outcome))
        }
    }

    /// The client's request for a push; nil once its deadline has passed (nothing is sent).
    private static func request(_ push: VoIPPush) -> APNSVoIPPush? {
        guard let timeLeft = push.timeLeft else { return nil }
        return APNSVoIPPush(
            app: APNSAppID(push.app), deviceToken: push.deviceToken,
            environment: push.environment ?? .sandbox,
            payload: push.payload, expiration: .at(push.expiration),
            apnsID: Self.uuid(push.apnsID) ?? UUID.randomVersion4(),
            timeout: timeLeft)
    }

    private static func attempt(_ outcome: APNSOutcome) -> PushAttempt {
        PushAttempt(
            disposition: outcome.disposition,
            status: outcome.status,
            reason: outcome.status == 200 ? nil : outcome.code,
            apnsID: outcome.apnsID,
            uniqueID: outcome.uniqueID,
            timestamp: outcome.timestamp,
            minimumRetryDelay: outcome.status == 429 ? .seconds(1) : .zero,
            latency: outcome.latency)
    }

    /// The UUID of a lower- or upper-case 8-4-4-4-12 text (what ``APNSID/make(callId:deviceKey:replay:)``
    /// writes), read directly: `UUID(uuidString:)` goes through `sscanf`.
    static func uuid(_ text: String) -> UUID? {
        // Zeroed storage to parse into (`UUID()` would draw random bytes first, a file read each time).
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &uuid) { Hex.readUUID(text, into: $0) } ? UUID(uuid: uuid) : nil
    }
}
