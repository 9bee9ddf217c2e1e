import CallContract
import Foundation

/// The life of one delivery after dedupe — expiry, cancellation, credential admission, pushes
/// and retries — as a value whose methods say what to do next. `DeliveryProcessor` performs the
/// actions (asks the credential circuit, pushes, writes, sleeps) and reports back, so "where is a
/// ring retried, where does a cancel win, when does it expire" has this one home.
///
/// The rules:
/// - nothing is pushed once the ring deadline is closer than `retry.minimumRemaining` (`expired`);
/// - a cancel seen before an attempt, or during a back-off, wins (`cancelled`); a push already
///   accepted stays `sent`;
/// - a delivery whose task was cancelled (revoke, shutdown) before a push went out hands back;
/// - retryable answers back off with jitter within the deadline; `ExpiredProviderToken` is
///   retried once at once (the client has renewed the token), and a second one right after the
///   renewal is a credentials failure like the other 403s.
struct DeliveryStateMachine {
    enum Action: Equatable {
        /// Ask the credential circuit whether this delivery may push now (`admitted`).
        case admit
        /// Push attempt `status.attempt`, to be answered by `deadline` (`pushed`).
        case push(deadline: Date)
        /// Make this `retrying` status durable (`retryRecorded`); `reason` is what is retried.
        case recordRetry(CallStatus, reason: String?)
        /// Wait unless the call is cancelled first (`wokeUp`).
        case backOff(Duration)
        /// Record the outcome durably: the DLQ record first when `deadLetter`. `pushed`: APNs
        /// answered a push of this delivery, so the outcome is written even if the delivery is
        /// cancelled meanwhile (the next owner would otherwise push again).
        case finish(CallStatus, deadLetter: Bool, pushed: Bool)
        /// Stop without an outcome: the next owner of the partition does the delivery again.
        case handBack
    }

    struct Settings {
        var retry: RetryPolicy
        var attemptTimeout: Duration
    }

    let ring: RingRequest
    let settings: Settings
    private(set) var status: CallStatus
    private var renewedToken = false
    private var pendingDelay: Duration?
    /// Whether the last push was this delivery's credential probe.
    private(set) var probing = false

    init(ring: RingRequest, status: CallStatus, settings: Settings) {
        self.ring = ring
        self.status = status
        self.settings = settings
    }

    /// The first step, before any push.
    mutating func begin(now: Date, callCancelled: Bool) -> Action {
        if ring.isExpired(at: now) { return finish(.expired, at: now) }
        if callCancelled { return finish(.cancelled, at: now) }
        return .admit
    }

    /// The step before each attempt: whatever happened since, is there still a reason and room to push?
    private mutating func nextAttempt(now: Date, callCancelled: Bool, taskCancelled: Bool) -> Action {
        if taskCancelled { return .handBack }
        if callCancelled { return finish(.cancelled, at: now) }
        guard ring.ringDeadline.timeIntervalSince(now) > settings.retry.minimumRemaining.inSeconds else {
            return finish(.expired, at: now)
        }
        return .admit
    }

    /// The credential circuit's answer.
    mutating func admitted(_ admission: CredentialCircuit.Admission, now: Date, taskCancelled: Bool) -> Action {
        if taskCancelled { return .handBack }
        if case .suspended(let until, let reason) = admission {
            status.apns = nil
            status.fcm = nil
            let scope = CredentialScope(app: ring.app, device: ring.device)
            let place = scope.environment.map { " in \($0.rawValue)" } ?? ""
            status.error = .init(code: DeliveryProcessor.suspendedCode,
                                 message: "not pushed: \(scope.service) refused the credentials of app \(ring.app)\(place) "
                                     + "(\(reason)); its pushes are suspended until \(ContractCoding.format(until))")
            status.state = .failed
            status.at = now
            return .finish(status, deadLetter: true, pushed: false)
        }
        probing = admission == .probe
        status.attempt += 1
        return .push(deadline: min(ring.ringDeadline, now.addingTimeInterval(settings.attemptTimeout.inSeconds)))
    }

    /// What the credential circuit should learn from an answer: a refusal, an acceptance, or nothing.
    func credentialEvidence(of attempt: PushAttempt) -> CredentialCircuit.Evidence {
        switch attempt.disposition {
        case .credentialsInvalid: .refused(reason: attempt.reason ?? "status-\(attempt.status ?? 0)")
        case .sent, .tokenDead, .requestInvalid: .accepted
        case .renewTokenAndRetry: renewedToken ? .refused(reason: attempt.reason ?? "ExpiredProviderToken") : .inconclusive
        case .retry: .inconclusive
        }
    }

    /// APNs' answer to the attempt.
    mutating func pushed(_ attempt: PushAttempt, now: Date, callCancelled: Bool) -> Action {
        status.apns = attempt.details
        status.fcm = attempt.fcm
        status.at = now
        switch attempt.disposition {
        case .sent:
            status.state = .sent
            return .finish(status, deadLetter: false, pushed: true)
        case .tokenDead, .requestInvalid, .credentialsInvalid:
            return fail(code: attempt.reason ?? "status-\(attempt.status ?? 0)",
                        message: attempt.disposition.explanation(service: attempt.fcm == nil ? "APNs" : "FCM"), pushed: true)
        case .renewTokenAndRetry where !renewedToken:
            // The client renewed the provider token; one more attempt at once, after the retry is recorded.
            renewedToken = true
            status.state = .retrying
            pendingDelay = nil
            return .recordRetry(status, reason: attempt.reason)
        case .renewTokenAndRetry:
            return fail(code: attempt.reason ?? "ExpiredProviderToken", message: attempt.disposition.explanation(service: "APNs"), pushed: true)
        case .retry:
            if callCancelled { return finish(.cancelled, at: now) }
            switch settings.retry.decide(afterAttempt: status.attempt, now: now, ringDeadline: ring.ringDeadline,
                                         minimumDelay: attempt.minimumRetryDelay) {
            case .expire:
                return finish(.expired, at: now)
            case .giveUp:
                return fail(code: attempt.reason ?? "retries-exhausted", message: "gave up after \(status.attempt) attempts", pushed: true)
            case .retry(let delay):
                status.state = .retrying
                pendingDelay = delay
                return .recordRetry(status, reason: attempt.reason)
            }
        }
    }

    /// The `retrying` status is durable.
    mutating func retryRecorded(now: Date, callCancelled: Bool, taskCancelled: Bool) -> Action {
        status.apns = nil
        status.fcm = nil
        if let delay = pendingDelay {
            pendingDelay = nil
            if taskCancelled { return .handBack }
            return .backOff(delay)
        }
        return nextAttempt(now: now, callCancelled: callCancelled, taskCancelled: taskCancelled)
    }

    /// The back-off ended: `callCancelled` when a cancel ended it.
    mutating func wokeUp(now: Date, callCancelled: Bool, taskCancelled: Bool) -> Action {
        nextAttempt(now: now, callCancelled: callCancelled, taskCancelled: taskCancelled)
    }

    private mutating func finish(_ state: CallStatus.State, at now: Date) -> Action {
        status.state = state
        status.at = now
        return .finish(status, deadLetter: false, pushed: false)
    }

    private mutating func fail(code: String, message: String, pushed: Bool) -> Action {
        status.state = .failed
        status.error = .init(code: code, message: message)
        return .finish(status, deadLetter: true, pushed: pushed)
    }
}

extension PushAttempt.Disposition {
    /// The DLQ reason's text; `service` names who answered (`APNs`, `FCM`).
    func explanation(service: String) -> String {
        switch self {
        case .sent: "accepted by \(service)"
        case .retry: "temporary failure"
        case .renewTokenAndRetry: "provider token expired again after renewal"
        case .tokenDead: "the device token is no longer valid; forget it"
        case .requestInvalid: "\(service) refused the request as invalid"
        case .credentialsInvalid: "\(service) refused the app's credentials"
        }
    }
}
