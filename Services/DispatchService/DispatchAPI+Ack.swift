import CallContract
import CallpushCore
import Foundation
import Hummingbird
import Kafka
import NIOCore
import Locking

extension DispatchAPI {
    /// `POST /v1/calls/{callId}/ack`: the device reports, authenticated by the ack token from its
    /// VoIP payload (no API key), so everything here is bounded for anyone on the internet:
    /// - a rate limit per client address (before the body is read) and per call (after the token);
    /// - a small body limit (`limits.ackMaxBodyBytes`) and a bounded `error` (``CallAck/Limits``);
    /// - the token expires at the ring deadline plus `ackGrace` and names its replay generation;
    /// - one status per (call, device, replay, outcome): a repeat gets the same answer and writes nothing.
    func ack(_ request: Request, callId: String, client: String, channel: (any Channel)? = nil) async throws(DispatchProblem) -> Response {
        if let wait = ackLimiterPerAddress.acquire(client) { throw refusedAck("rate-limited", .ackRateLimited(retryAfter: wait)) }
        let body = try await collect(request, limit: configuration.limits.ackMaxBodyBytes, channel: channel)
        let ack: CallAck
        do {
            ack = try CallAck.decode(body)
        } catch {
            throw DispatchProblem.contract(error)
        }
        guard let claims = ackTokens.claims(ack.ackToken, callId: callId, deviceKey: ack.deviceKey) else {
            throw refusedAck("bad-token", .badAckToken)
        }
        if let wait = ackLimiterPerCall.acquire(callId) { throw refusedAck("rate-limited", .ackRateLimited(retryAfter: wait)) }
        // Which tenant's call (the ack names only the call id and the device).
        let call = view.calls(callId: callId).first { $0.deliveries.contains { $0.deviceKey == ack.deviceKey } }
        let delivery = call?.deliveries.first { $0.deviceKey == ack.deviceKey }
        let replay: Int, deadline: Date
        if let tokenDeadline = claims.ringDeadline, let tokenReplay = claims.replay {
            (replay, deadline) = (tokenReplay, tokenDeadline)
        } else if let delivery, let viewDeadline = call?.ringDeadline {
            // A version-1 token carries no deadline: only as long as the view knows the call's.
            (replay, deadline) = (delivery.replay, viewDeadline)
        } else {
            throw refusedAck("expired", .ackExpired)
        }
        guard Date() <= deadline.addingTimeInterval(configuration.ackGrace.inSeconds) else { throw refusedAck("expired", .ackExpired) }

        let state: CallStatus.State = ack.outcome == .reported ? .reported : .suppressed
        let answer = APIModels.encode(APIModels.AckAccepted(callId: callId, deviceKey: ack.deviceKey, state: state.rawValue))
        // Already in the view (reported through this or another instance): nothing to write.
        if let known = delivery?.report?.status, known.state == state, known.replay == replay {
            metrics.ackRepeated()
            return Self.json(.accepted, answer)
        }
        let onceKey = "\(callId)/\(ack.deviceKey)/\(replay)/\(state.rawValue)"
        switch await acks.begin(key: onceKey, fingerprint: []) {
        case .replay(let stored):
            metrics.ackRepeated()
            return Self.json(.accepted, stored)
        case .conflict, .proceed: break
        }
        let status = CallStatus(
            callId: callId, deviceId: delivery?.deviceId, deviceKey: ack.deviceKey, app: call?.app, state: state,
            attempt: delivery?.lastStatus?.attempt ?? 0, replay: replay, at: ContractCoding.truncatedToMilliseconds(Date()),
            apns: nil, error: ack.error, worker: configuration.instanceID, tenant: call?.tenant)
        // Same partition number as the call's requests (known from the view); else the key decides.
        let record = KafkaProducerRecord(topic: configuration.statusTopic, partition: call?.partition, key: Array(callId.utf8),
                                         value: Array((try? status.encoded()) ?? Data()))
        do {
            _ = try await publisher.publish([record])
        } catch {
            acks.finish(key: onceKey, fingerprint: [], response: nil)
            throw error
        }
        acks.finish(key: onceKey, fingerprint: [], response: answer)
        return Self.json(.accepted, answer)
    }

    /// Counts a refused ack and logs it at most once per throttle interval (the route is open to anyone).
    func refusedAck(_ reason: String, _ problem: DispatchProblem) -> DispatchProblem {
        metrics.ackRefused(reason: reason)
        if let suppressed = logThrottle.admit("ack-\(reason)") {
            logger.info("ack refused", metadata: ["ack.reason": "\(reason)", "log.suppressed": "\(suppressed)"])
        }
        return problem
    }

    /// The client's address: the peer's, or with `trustedProxyHops` proxies in front, the
    /// `X-Forwarded-For` entry the outermost trusted proxy added (entries further left are the
    /// client's own claims and are not trusted).
    static func clientAddress(peer: String?, forwardedFor: [String], trustedProxyHops hops: Int) -> String {
        guard hops > 0 else { return peer ?? "unknown" }
        let entries = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !entries.isEmpty else { return peer ?? "unknown" }
        let index = max(0, entries.count - hops)
        return String(entries[index].prefix(64))
    }
}
