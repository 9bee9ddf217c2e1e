import CallContract
import CallpushCore
import Foundation
import Logging

/// Turns one request event into its outcome: validate, expire, deduplicate, cancel, push with
/// retries bounded by the ring deadline, and make the outcome durable (status, DLQ).
///
/// `process` returns `.finished` only after every record it wrote was acknowledged, so the
/// caller may then store the event's offset (at-least-once). It returns `.handedBack` when the
/// task is cancelled before the outcome is durable (the next owner of the partition redoes it).
public struct DeliveryProcessor: Sendable {
    public struct Settings: Sendable {
        /// Written into every status (`worker`): pod name or host name.
        public var workerID: String
        /// Apps this worker has credentials for; a ring for another app is rejected.
        public var apps: Set<String>
        public var retry: RetryPolicy
        /// Longest wait for one APNs answer.
        public var attemptTimeout: Duration
        /// How long a cancelled call is remembered after its cancel.
        public var cancelMemory: Duration
        /// How long the outcome of a push that went out keeps being written after the delivery was
        /// cancelled (revoke or shutdown past the drain bound).
        public var outcomeWriteBound: Duration = .seconds(10)

        public init(workerID: String, apps: Set<String>, retry: RetryPolicy = .init(),
                    attemptTimeout: Duration = .seconds(5), cancelMemory: Duration = .seconds(600)) {
            self.workerID = workerID
            self.apps = apps
            self.retry = retry
            self.attemptTimeout = attemptTimeout
            self.cancelMemory = cancelMemory
        }
    }

    public var settings: Settings
    public let sender: any VoIPPushSending
    public let publisher: any OutcomePublishing
    public let cancels: CancelSignals
    public let dedupe: PartitionDedupe
    public let ackTokens: AckTokenSigner
    /// Suspends an app's pushes after APNs refused its credentials.
    public let credentials: CredentialCircuit
    public var logger: Logger
    public var metrics: WorkerMetrics?
    public var now: @Sendable () -> Date

    public init(settings: Settings, sender: any VoIPPushSending, publisher: any OutcomePublishing,
                cancels: CancelSignals, dedupe: PartitionDedupe, ackTokens: AckTokenSigner,
                credentials: CredentialCircuit = CredentialCircuit(),
                logger: Logger, metrics: WorkerMetrics? = nil, now: @escaping @Sendable () -> Date = { Date() }) {
        self.settings = settings
        self.sender = sender
        self.publisher = publisher
        self.cancels = cancels
        self.dedupe = dedupe
        self.ackTokens = ackTokens
        self.credentials = credentials
        self.logger = logger
        self.metrics = metrics
        self.now = now
    }

    /// What an event is, learned before its delivery task starts.
    public enum Intake: Sendable {
        /// A cancel, already in effect.
        case cancelled
        case ring(RingRequest)
        case invalid(ContractError)
    }

    /// Decodes an event and applies a cancel at once. The consume loop calls this in partition
    /// order before it starts the event's task, so a ring that follows its cancel in the topic
    /// always sees it (delivery tasks run concurrently and may start in any order).
    public func intake(_ event: InboundEvent) -> Intake {
        let request: CallRequest
        do {
            request = try CallRequest.decode(Data(event.value))
        } catch {
            return .invalid(error)
        }
        switch request {
        case .cancel(let cancel):
            cancels.cancel(callId: cancel.scope, forgetAfter: now().addingTimeInterval(settings.cancelMemory.seconds))
            logger.info("call cancelled", metadata: ["call.id": "\(cancel.callId)"])
            return .cancelled
        case .ring(let ring):
            return .ring(ring)
        }
    }

    /// Processes an event whose intake is done (see `intake(_:)`).
    public func process(_ intake: Intake, event: InboundEvent) async -> DeliveryResult {
        switch intake {
        case .cancelled:
            return .finished(nil)
        case .invalid(let error):
            return await reject(event, error: error)
        case .ring(let ring):
            guard settings.apps.contains(ring.app) else {
                return await reject(event, error: ContractError(.invalidValue, path: "app", "unknown app \"\(ring.app)\""), ring: ring)
            }
            return await deliver(ring, event: event)
        }
    }

    /// Intake and processing in one step (one event at a time).
    public func process(_ event: InboundEvent) async -> DeliveryResult {
        await process(intake(event), event: event)
    }

    // MARK: - Ring

    private func deliver(_ ring: RingRequest, event: InboundEvent) async -> DeliveryResult {
        let deviceKey = DeviceKey.make(token: ring.device.token)
        var status = CallStatus(callId: ring.callId, deviceId: ring.device.id, deviceKey: deviceKey, app: ring.app,
                                state: .expired, attempt: 0, replay: ring.replay, at: now(), worker: settings.workerID, tenant: ring.tenant)
        let log = DeliveryLog(logger: logger, ring: ring, deviceKey: deviceKey)

        // Dedupe first: a redelivered event whose delivery was already handled (e.g. `sent`) is a
        // duplicate even when its deadline has passed since — reporting it `expired` would tell
        // the backend the phone did not ring when it did.
        let key = DeliveryKey(callId: ring.callId, deviceKey: deviceKey, replay: ring.replay)
        guard dedupe.insert(key, ringDeadline: ring.ringDeadline, partition: event.partition) else {
            log(.info, "duplicate delivery, not pushed")
            status.state = .duplicate
            return await finish(status, event: event)
        }
        let result = await deliverOnce(ring, event: event, status: status, deviceKey: deviceKey, log: log)
        if result == .handedBack { dedupe.release(key, partition: event.partition) }
        return result
    }

    /// A delivery that passed dedupe: expiry, cancellation, then the push with its retries.
    private func deliverOnce(_ ring: RingRequest, event: InboundEvent, status: CallStatus, deviceKey: String,
                             log: DeliveryLog) async -> DeliveryResult {
        var status = status
        if ring.isExpired(at: now()) {
            return await finish(status, event: event)
        }
        if cancels.isCancelled(ring) {
            status.state = .cancelled
            return await finish(status, event: event)
        }

        let payload: Data
        do {
            let ackToken = ackTokens.token(callId: ring.callId, deviceKey: deviceKey, replay: ring.replay, ringDeadline: ring.ringDeadline)
            payload = try VoIPPayload(ring: ring, deviceKey: deviceKey, ackToken: ackToken).encoded()
        } catch {
            return await reject(event, error: error, ring: ring)
        }
        let apnsID = APNsID.make(callId: ring.callId, deviceKey: deviceKey, replay: ring.replay)
        var renewedToken = false

        while true {
            if Task.isCancelled { return .handedBack }
            let start = now()
            guard ring.ringDeadline.timeIntervalSince(start) > settings.retry.minimumRemaining.seconds else {
                status.state = .expired
                return await finish(status, event: event)
            }
            let admission = credentials.admit(app: ring.app, now: start)
            if case .suspended(let until, let reason) = admission {
                status.state = .failed
                status.apns = nil
                status.at = start
                status.error = .init(code: Self.suspendedCode,
                                     message: "not pushed: APNs refused the credentials of app \(ring.app) (\(reason)); "
                                         + "its pushes are suspended until \(ContractCoding.format(until))")
                return await finish(status, event: event, deadLetter: true)
            }
            status.attempt += 1
            let push = VoIPPush(app: ring.app, deviceToken: ring.device.token, environment: ring.device.environment,
                                apnsID: apnsID, expiration: ring.ringDeadline, payload: payload,
                                deadline: min(ring.ringDeadline, start.addingTimeInterval(settings.attemptTimeout.seconds)))
            let sentAt = ContinuousClock.now
            let attempt = await sender.send(push)
            metrics?.apnsLatency(app: ring.app, ContinuousClock.now - sentAt)
            status.apns = attempt.details
            status.at = now()
            recordCredentialEvidence(attempt, app: ring.app, probe: admission == .probe)

            switch attempt.disposition {
            case .sent:
                status.state = .sent
                log(.info, "push sent", metadata: ["apns.attempt": "\(status.attempt)"])
                return await finish(status, event: event, evenIfCancelled: true)
            case .tokenDead, .requestInvalid, .credentialsInvalid:
                status.state = .failed
                status.error = .init(code: attempt.reason ?? "status-\(attempt.status ?? 0)", message: attempt.disposition.explanation)
                log(.warning, "push failed", metadata: ["apns.reason": "\(attempt.reason ?? "-")", "apns.status": "\(attempt.status ?? 0)"])
                return await finish(status, event: event, deadLetter: true, evenIfCancelled: true)
            case .renewTokenAndRetry where !renewedToken:
                renewedToken = true
                await sender.renewToken(app: ring.app)
                status.state = .retrying
                guard await publishDurably(status, partition: event.partition) else { return .handedBack }
                continue
            case .renewTokenAndRetry, .retry:
                if cancels.isCancelled(ring) {
                    status.state = .cancelled
                    return await finish(status, event: event)
                }
                let decision = attempt.disposition == .retry
                    ? settings.retry.decide(afterAttempt: status.attempt, now: now(), ringDeadline: ring.ringDeadline,
                                            minimumDelay: attempt.minimumRetryDelay)
                    : .giveUp
                switch decision {
                case .expire:
                    status.state = .expired
                    return await finish(status, event: event)
                case .giveUp:
                    status.state = .failed
                    status.error = .init(code: attempt.reason ?? "retries-exhausted",
                                         message: "gave up after \(status.attempt) attempts")
                    return await finish(status, event: event, deadLetter: true)
                case .retry(let delay):
                    status.state = .retrying
                    metrics?.retry(app: ring.app, reason: attempt.reason)
                    log(.info, "push will be retried", metadata: ["apns.reason": "\(attempt.reason ?? "-")", "retry.delay_ms": "\(Int(delay.seconds * 1000))"])
                    guard await publishDurably(status, partition: event.partition) else { return .handedBack }
                    status.apns = nil
                    if await cancels.sleep(for: delay, unlessCancelled: ring.cancelScope) {
                        status.state = .cancelled
                        status.at = now()
                        return await finish(status, event: event)
                    }
                }
            }
        }
    }

    /// Error code of a delivery not pushed because its app is suspended (`CredentialCircuit`).
    public static let suspendedCode = "app-suspended"

    private func recordCredentialEvidence(_ attempt: PushAttempt, app: String, probe: Bool) {
        let evidence: CredentialCircuit.Evidence = switch attempt.disposition {
        case .credentialsInvalid: .refused(reason: attempt.reason ?? "status-\(attempt.status ?? 0)")
        case .sent, .tokenDead, .requestInvalid: .accepted
        case .retry, .renewTokenAndRetry: .inconclusive
        }
        if let until = credentials.record(app: app, evidence, probe: probe, now: now()) {
            logger.error("APNs refused the app's credentials; its pushes are suspended (fix the key or certificate, then replay the DLQ)",
                         metadata: ["app": "\(app)", "apns.reason": "\(attempt.reason ?? "-")",
                                    "suspended.until": "\(ContractCoding.format(until))"])
        } else if probe, evidence == .accepted {
            logger.notice("APNs accepted the app's credentials again; pushes resumed", metadata: ["app": "\(app)"])
        }
    }

    // MARK: - Outcomes

    /// An invalid event: `rejected` status (when a call id can be read) and a DLQ record.
    private func reject(_ event: InboundEvent, error: ContractError, ring: RingRequest? = nil) async -> DeliveryResult {
        logger.warning("event rejected", metadata: [
            "call.id": "\(ring?.callId ?? event.keyAsCallID ?? "-")", "kafka.partition": "\(event.partition)",
            "kafka.offset": "\(event.offset)", "error.code": "\(error.code.rawValue)", "error.reason": "\(error.description)",
        ])
        let headers = deadLetterHeaders(event, code: error.code.rawValue, reason: error.description, attempts: 0)
        guard await durably({ try await publisher.deadLetter(key: event.key, value: event.value, headers: headers) }) else {
            return .handedBack
        }
        metrics?.deadLetter(code: error.code.rawValue)
        metrics?.outcome(app: ring?.app, state: .rejected, reason: error.code.rawValue)
        guard let callId = ring?.callId ?? event.keyAsCallID else { return .finished(.rejected) }
        let status = CallStatus(callId: callId, deviceId: ring?.device.id,
                                deviceKey: ring.map { DeviceKey.make(token: $0.device.token) }, app: ring?.app,
                                state: .rejected, attempt: 0, replay: ring?.replay ?? 0, at: now(),
                                error: .init(code: error.code.rawValue, message: error.description), worker: settings.workerID,
                                tenant: ring?.tenant)
        guard await publishDurably(status, partition: event.partition) else { return .handedBack }
        return .finished(.rejected)
    }

    /// Writes the terminal status (and the DLQ record first, when asked) durably.
    private func finish(_ status: CallStatus, event: InboundEvent, deadLetter: Bool = false,
                        evenIfCancelled: Bool = false) async -> DeliveryResult {
        if deadLetter {
            let headers = deadLetterHeaders(event, code: status.error?.code ?? status.state.rawValue,
                                            reason: status.error?.message ?? status.state.rawValue, attempts: status.attempt)
            guard await durably({ try await publisher.deadLetter(key: event.key, value: event.value, headers: headers) },
                                evenIfCancelled: evenIfCancelled) else { return .handedBack }
            metrics?.deadLetter(code: status.error?.code ?? status.state.rawValue)
        }
        guard await publishDurably(status, partition: event.partition, evenIfCancelled: evenIfCancelled) else { return .handedBack }
        metrics?.outcome(app: status.app, state: status.state, reason: status.error?.code ?? status.apns?.reason)
        return .finished(status.state)
    }

    private func publishDurably(_ status: CallStatus, partition: Int32, evenIfCancelled: Bool = false) async -> Bool {
        await durably({ try await publisher.publish(status: status, partition: partition) }, evenIfCancelled: evenIfCancelled)
    }

    /// Retries a write until it is acknowledged. Without `evenIfCancelled` it gives up when the task
    /// is cancelled (nothing was pushed: the next owner redoes the event). With it — a push went out,
    /// so its outcome must be recorded or the next owner would ring again — it keeps retrying while
    /// the delivery runs (a Kafka outage longer than any bound must not strand a delivery that
    /// nobody redoes while this worker keeps the partition), and once the delivery is cancelled
    /// (revoke, shutdown) the write goes on in a task that does not inherit the cancellation,
    /// bounded by `outcomeWriteBound`.
    private func durably(_ write: @escaping @Sendable () async throws -> Void, evenIfCancelled: Bool = false) async -> Bool {
        guard evenIfCancelled else { return await retrying(write, until: nil) }
        if !Task.isCancelled, await retrying(write, until: nil) { return true }
        let deadline = ContinuousClock.now + settings.outcomeWriteBound
        return await Task { await self.retrying(write, until: deadline) }.value
    }

    private func retrying(_ write: @Sendable () async throws -> Void, until deadline: ContinuousClock.Instant?) async -> Bool {
        var delay = 0.05
        while true {
            do {
                try await write()
                return true
            } catch {
                logger.error("could not write outcome to Kafka; retrying", metadata: ["error": "\(error)"])
            }
            if Task.isCancelled { return false }
            if let deadline, ContinuousClock.now + .seconds(delay) > deadline { return false }
            try? await Task.sleep(for: .seconds(delay))
            delay = min(delay * 2, 2)
        }
    }

    private func deadLetterHeaders(_ event: InboundEvent, code: String, reason: String, attempts: Int) -> [(String, String)] {
        [
            (DeadLetterHeader.error, code),
            (DeadLetterHeader.reason, reason),
            (DeadLetterHeader.attempts, String(attempts)),
            (DeadLetterHeader.originalPartition, String(event.partition)),
            (DeadLetterHeader.originalOffset, String(event.offset)),
            (DeadLetterHeader.failedAt, ContractCoding.format(now())),
        ]
    }
}

extension PushAttempt.Disposition {
    var explanation: String {
        switch self {
        case .sent: "accepted by APNs"
        case .retry: "temporary failure"
        case .renewTokenAndRetry: "provider token expired again after renewal"
        case .tokenDead: "the device token is no longer valid; forget it"
        case .requestInvalid: "APNs refused the request as invalid"
        case .credentialsInvalid: "APNs refused the app's credentials"
        }
    }
}

/// The log lines of one delivery, keyed by the call, with the device as a key — never the token.
/// The keyed metadata is built only when a line is written: building it for every delivery was
/// ~2.5 % of a worker's CPU time under load, at a level where nothing is logged.
struct DeliveryLog {
    let logger: Logger
    let ring: RingRequest
    let deviceKey: String

    func callAsFunction(_ level: Logger.Level, _ message: @autoclosure () -> Logger.Message,
                        metadata: @autoclosure () -> Logger.Metadata = [:]) {
        guard logger.logLevel <= level else { return }
        var keyed = logger
        // One metadata write, not four: a handler may re-render its metadata on every change (swift-log's
        // StreamLogHandler does).
        var all = keyed.handler.metadata
        all["call.id"] = "\(ring.callId)"
        all["device.key"] = "\(deviceKey.prefix(12))"
        all["call.replay"] = "\(ring.replay)"
        all["app"] = "\(ring.app)"
        keyed.handler.metadata = all
        keyed.log(level: level, message(), metadata: metadata())
    }
}
