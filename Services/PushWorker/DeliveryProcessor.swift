import CallContract
import CallTracing
import CallpushCore
import Foundation
import Locking
import Logging
import Tracing

/// Turns one request event into its outcome: validate, expire, deduplicate, cancel, push with
/// retries bounded by the ring deadline, and make the outcome durable (status, DLQ).
///
/// `process` returns `.finished` only after every record it wrote was acknowledged (or refused for
/// good, see `finish`), so the caller may then store the event's offset (at-least-once). It
/// returns `.handedBack` when the task is cancelled before the outcome is durable (the next owner
/// of the partition redoes it). The retry, cancel and expiry rules of a ring live in
/// `DeliveryStateMachine`; this type performs what it asks for.
public struct DeliveryProcessor: Sendable {
    public struct Settings: Sendable {
        /// Written into every status (`worker`): pod name or host name.
        public var workerID: String
        /// Apps this worker has credentials for (on any platform); a ring for another app is rejected.
        public var apps: Set<String>
        /// Apps with APNs credentials (iPhones).
        public var iosApps: Set<String>
        /// Apps with FCM credentials (Android phones).
        public var androidApps: Set<String>
        public var retry: RetryPolicy
        /// Longest wait for one APNs answer.
        public var attemptTimeout: Duration
        /// How long a cancelled call is remembered after its cancel.
        public var cancelMemory: Duration
        /// How long the outcome of a push that went out keeps being written after the delivery was
        /// cancelled (revoke or shutdown past the drain bound).
        public var outcomeWriteBound: Duration = .seconds(10)

        /// - Parameters:
        ///   - apps: apps with APNs credentials.
        ///   - androidApps: apps with FCM credentials.
        public init(workerID: String, apps: Set<String>, androidApps: Set<String> = [], retry: RetryPolicy = .init(),
                    attemptTimeout: Duration = .seconds(5), cancelMemory: Duration = .seconds(600)) {
            self.workerID = workerID
            self.apps = apps.union(androidApps)
            self.iosApps = apps
            self.androidApps = androidApps
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
    /// Told of every outcome write (`/readyz`, `/healthz`).
    public var health: WorkerHealth?
    public var now: @Sendable () -> Date

    public init(settings: Settings, sender: any VoIPPushSending, publisher: any OutcomePublishing,
                cancels: CancelSignals, dedupe: PartitionDedupe, ackTokens: AckTokenSigner,
                credentials: CredentialCircuit = CredentialCircuit(),
                logger: Logger, metrics: WorkerMetrics? = nil, health: WorkerHealth? = nil,
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.settings = settings
        self.sender = sender
        self.publisher = publisher
        self.cancels = cancels
        self.dedupe = dedupe
        self.ackTokens = ackTokens
        self.credentials = credentials
        self.logger = logger
        self.metrics = metrics
        self.health = health
        self.now = now
    }

    /// What an event is, learned before its delivery task starts.
    public enum Intake: Sendable {
        /// A cancel, already in effect; its marker status is still to be written.
        case cancel(CancelRequest)
        /// Boxed: an intake is copied as a run passes it on, and a box is one retain where a ring is one per string.
        indirect case ring(RingRequest)
        case invalid(ContractError)
    }

    /// Decodes an event and applies a cancel at once. The consume loop calls this in partition
    /// order as it reads, before the event waits for anything, so a ring that follows its cancel in
    /// the topic always sees it, and a cancel stops a ring read before it that is still waiting or
    /// backing off (delivery tasks run concurrently and may start in any order).
    public func intake(_ event: InboundEvent) -> Intake {
        let decoding = event.trace?.child(SpanName.decode)
        defer { decoding?.end() }
        let request: CallRequest
        do {
            request = try CallRequest.decode(event.value)
        } catch {
            decoding?.fail(error.code.rawValue)
            return .invalid(error)
        }
        switch request {
        case .cancel(let cancel):
            cancels.cancel(callId: cancel.scope, forgetAfter: now().addingTimeInterval(settings.cancelMemory.inSeconds))
            logger.info("call cancelled", metadata: ["call.id": "\(cancel.callId)"])
            return .cancel(cancel)
        case .ring(let ring):
            return .ring(ring)
        }
    }

    /// Processes an event whose intake is done (see `intake(_:)`).
    public func process(_ intake: Intake, event: InboundEvent) async -> DeliveryResult {
        guard let trace = event.trace else { return await processIntake(intake, event: event) }
        // The span is the current context meanwhile, so the delivery's log lines carry its trace id.
        let result = await ServiceContext.withValue(trace.span.context) { await processIntake(intake, event: event) }
        trace.finish(result)
        return result
    }

    private func processIntake(_ intake: Intake, event: InboundEvent) async -> DeliveryResult {
        switch intake {
        case .cancel(let cancel):
            return await recordCancel(cancel, event: event)
        case .invalid(let error):
            return await reject(event, error: error)
        case .ring(let ring):
            guard settings.apps.contains(ring.app) else {
                return await reject(event, error: ContractError(.invalidValue, path: "app", "unknown app \"\(ring.app)\""), ring: ring)
            }
            // An app known for the other platform only: rejected (DLQ), replayable once the apps file
            // gives it credentials for this one.
            guard (ring.device.platform == .ios ? settings.iosApps : settings.androidApps).contains(ring.app) else {
                let service = ring.device.platform == .ios ? "APNs" : "FCM"
                return await reject(event, error: ContractError(.invalidValue, path: "device.platform",
                                                                "app \"\(ring.app)\" has no \(service) credentials in this worker's apps file"),
                                    ring: ring)
            }
            return await deliver(ring, event: event)
        }
    }

    /// Intake and processing in one step (one event at a time).
    public func process(_ event: InboundEvent) async -> DeliveryResult {
        await process(intake(event), event: event)
    }

    // MARK: - Cancel

    /// Makes a processed cancel durable: a `cancelled` status with no device (the call-level marker),
    /// from which a new owner of the partition rebuilds its cancel memory. Written for every cancel,
    /// also one that comes before its ring, so a restart, a rebalance or a replay never rings a
    /// cancelled call.
    private func recordCancel(_ cancel: CancelRequest, event: InboundEvent) async -> DeliveryResult {
        let marker = CallStatus(callId: cancel.callId, state: .cancelled, attempt: 0, replay: 0, at: now(),
                                error: cancel.reason.map { .init(code: "cancel", message: String($0.prefix(256))) },
                                worker: settings.workerID, tenant: cancel.tenant)
        event.trace?.span.attributes[SpanAttributeName.callID] = cancel.callId
        switch await writeStatus(marker, event: event) {
        case .written: return .finished(.cancelled)
        case .handedBack: return .handedBack
        case .refused(let code):
            // Nothing else to keep: the cancel is in effect here and in the request topic.
            logger.critical("cannot write the cancel marker; a new owner of the partition will not know of this cancel",
                            metadata: ["call.id": "\(cancel.callId)", "kafka.error.code": "\(code)"])
            return .finished(nil)
        }
    }

    // MARK: - Ring

    private func deliver(_ ring: RingRequest, event: InboundEvent) async -> DeliveryResult {
        let at = now()
        switch admit(ring, event: event, at: at) {
        case .duplicate(let status):
            return await finish(status, event: event, platform: ring.device.platform)
        case .done(let result):
            return await result()
        case .delivery(let delivery):
            let action = delivery.machine.begin(now: at, callCancelled: cancels.isCancelled(ring))
            return await drive(delivery, from: action)
        }
    }

    /// What `admit` made of a ring.
    private enum Admitted {
        /// A ring that passed dedupe, ready for its first step.
        case delivery(Delivery)
        /// A duplicate: this status is its outcome.
        case duplicate(CallStatus)
        /// A ring whose payload cannot be built: its outcome is written by this.
        case done(@Sendable () async -> DeliveryResult)
    }

    /// Dedupe, then the payload of a ring (synchronous), `at` being now.
    private func admit(_ ring: RingRequest, event: InboundEvent, at: Date) -> Admitted {
        let deviceKey = DeviceKey.make(token: ring.device.token)
        let status = CallStatus(callId: ring.callId, deviceId: ring.device.id, deviceKey: deviceKey, app: ring.app,
                                state: .expired, attempt: 0, replay: ring.replay, at: at, worker: settings.workerID,
                                tenant: ring.tenant)
        let log = DeliveryLog(logger: logger, ring: ring, deviceKey: deviceKey)

        // Dedupe first: a redelivered event whose delivery was already handled (e.g. `sent`) is a
        // duplicate even when its deadline has passed since — reporting it `expired` would tell
        // the backend the phone did not ring when it did. The store is this assignment's: a late
        // hand-back after the partition was assigned again does not touch the new one's.
        event.trace?.describe(ring, deviceKey: deviceKey)
        let store = dedupe.store(for: event.partition)
        let key = DeliveryKey(callId: ring.callId, deviceKey: deviceKey, replay: ring.replay)
        let deduping = event.trace?.child(SpanName.dedupe)
        let isNew = store.insert(key, ringDeadline: ring.ringDeadline)
        deduping?.attributes[SpanAttributeName.duplicate] = !isNew
        deduping?.end()
        guard isNew else {
            log(.info, "duplicate delivery, not pushed")
            var duplicate = status
            duplicate.state = .duplicate
            return .duplicate(duplicate)
        }
        // The same payload for both platforms: JSON for APNs, FCM's string map for Android.
        var payload = Data()
        var data: [String: String] = [:]
        do {
            let ackToken = ackTokens.token(callId: ring.callId, deviceKey: deviceKey, replay: ring.replay, ringDeadline: ring.ringDeadline)
            let voip = VoIPPayload(ring: ring, deviceKey: deviceKey, ackToken: ackToken)
            switch ring.device.platform {
            case .ios: payload = try voip.encoded()
            case .android: data = try voip.fcmData()
            }
        } catch {
            return .done {
                let result = await reject(event, error: error, ring: ring)
                if result == .handedBack { store.remove(key) }
                return result
            }
        }
        return .delivery(Delivery(
            ring: ring, event: event, log: log, payload: payload, data: data,
            apnsID: APNSID.make(callId: ring.callId, deviceKey: deviceKey, replay: ring.replay),
            scope: CredentialScope(app: ring.app, device: ring.device), store: store, key: key,
            machine: DeliveryStateMachine(ring: ring, status: status,
                                          settings: .init(retry: settings.retry, attemptTimeout: settings.attemptTimeout))))
    }

    /// A ring that passed dedupe, with what its pushes need. A class: a run hands each delivery
    /// from step to step, and a copy of this many fields would cost a retain and a release each.
    /// `@unchecked Sendable`: one task at a time owns it (the run's, or the one it continues alone in).
    private final class Delivery: @unchecked Sendable {
        let ring: RingRequest
        let event: InboundEvent
        let log: DeliveryLog
        let payload: Data
        let data: [String: String]
        let apnsID: String
        let scope: CredentialScope
        let store: PartitionDedupeStore
        let key: DeliveryKey
        var machine: DeliveryStateMachine
        /// Whether APNs (or FCM) accepted a push of it.
        var accepted = false

        init(ring: RingRequest, event: InboundEvent, log: DeliveryLog, payload: Data, data: [String: String], apnsID: String,
             scope: CredentialScope, store: PartitionDedupeStore, key: DeliveryKey, machine: DeliveryStateMachine) {
            self.ring = ring
            self.event = event
            self.log = log
            self.payload = payload
            self.data = data
            self.apnsID = apnsID
            self.scope = scope
            self.store = store
            self.key = key
            self.machine = machine
        }

        var platform: DevicePlatform { ring.device.platform }

        func push(deadline: Date) -> VoIPPush {
            switch platform {
            case .ios:
                VoIPPush(app: ring.app, deviceToken: ring.device.token, environment: ring.device.environment ?? .production,
                         apnsID: apnsID, expiration: ring.ringDeadline, payload: payload, deadline: deadline)
            case .android:
                VoIPPush(app: ring.app, fcmToken: ring.device.token, data: data, collapseKey: ring.callId,
                         expiration: ring.ringDeadline, deadline: deadline)
            }
        }
    }

    /// The credential circuit's answer for the delivery's next push (`at` being now).
    private func admitted(_ delivery: Delivery, at: Date? = nil) -> DeliveryStateMachine.Action {
        let at = at ?? now()
        return delivery.machine.admitted(credentials.admit(delivery.scope, now: at), now: at, taskCancelled: Task.isCancelled)
    }

    /// What the delivery learns from an attempt's answer, received `at`.
    private func answered(_ delivery: Delivery, _ attempt: PushAttempt, latency: Duration, at: Date,
                          latencies: inout WorkerMetrics.PushLatencyBatch) -> DeliveryStateMachine.Action {
        latencies.record(app: delivery.ring.app, platform: delivery.platform, latency, to: metrics)
        delivery.accepted = delivery.accepted || attempt.disposition == .sent
        recordCredentialEvidence(delivery.machine.credentialEvidence(of: attempt), scope: delivery.scope,
                                 probe: delivery.machine.probing, reason: attempt.reason, at: at)
        return delivery.machine.pushed(attempt, now: at, callCancelled: cancels.isCancelled(delivery.ring))
    }

    /// Logs a delivery's outcome as it is about to be written.
    private func logOutcome(_ outcome: CallStatus, pushed: Bool, _ delivery: Delivery) {
        let platform = delivery.platform
        switch outcome.state {
        case .sent:
            delivery.log(.info, "push sent", metadata: ["push.attempt": "\(outcome.attempt)", "push.platform": "\(platform.rawValue)"])
        case .failed where pushed:
            delivery.log(.warning, "push failed", metadata: ["push.reason": "\(outcome.apns?.reason ?? outcome.fcm?.errorCode ?? "-")",
                                                              "push.status": "\(outcome.apns?.status ?? outcome.fcm?.status ?? 0)",
                                                              "push.platform": "\(platform.rawValue)"])
        default:
            break
        }
    }

    /// Drives a delivery that passed dedupe through `DeliveryStateMachine` from `action` to its
    /// result. Handed back without a durable outcome, its dedupe entry is removed so the next copy
    /// is not answered `duplicate` — unless APNs accepted a push of it (then answering `duplicate`
    /// is right, and pushing again is not).
    private func drive(_ delivery: Delivery, from start: DeliveryStateMachine.Action) async -> DeliveryResult {
        let result = await steps(delivery, from: start)
        if result == .handedBack, !delivery.accepted { delivery.store.remove(delivery.key) }
        return result
    }

    private func steps(_ delivery: Delivery, from start: DeliveryStateMachine.Action) async -> DeliveryResult {
        let ring = delivery.ring
        let event = delivery.event
        let platform = delivery.platform
        var action = start
        var latencies = WorkerMetrics.PushLatencyBatch()
        while true {
            switch action {
            case .admit:
                action = admitted(delivery)
            case .push(let deadline):
                let attemptSpan = event.trace?.pushAttempt(delivery.machine.status.attempt, platform: platform)
                let sentAt = ContinuousClock.now
                let attempt = await sender.send(delivery.push(deadline: deadline))
                if let attemptSpan { DeliveryTrace.end(attemptSpan, with: attempt, platform: platform) }
                action = answered(delivery, attempt, latency: ContinuousClock.now - sentAt, at: now(), latencies: &latencies)
            case .recordRetry(let retrying, let reason):
                metrics?.retry(app: ring.app, platform: platform, reason: reason)
                delivery.log(.info, "push will be retried", metadata: ["push.reason": "\(reason ?? "-")", "push.platform": "\(platform.rawValue)"])
                // A `retrying` status the topic refuses for good is only information lost: go on retrying.
                if case .handedBack = await writeStatus(retrying, event: event) {
                    return .handedBack
                }
                action = delivery.machine.retryRecorded(now: now(), callCancelled: cancels.isCancelled(ring), taskCancelled: Task.isCancelled)
            case .backOff(let delay):
                let backingOff = event.trace?.child(SpanName.backoff)
                defer { backingOff?.end() }
                let cancelled = await cancels.sleep(for: delay, unlessCancelled: ring.cancelScope)
                action = delivery.machine.wokeUp(now: now(), callCancelled: cancelled, taskCancelled: Task.isCancelled)
            case .finish(let outcome, let deadLetter, let pushed):
                logOutcome(outcome, pushed: pushed, delivery)
                return await finish(outcome, event: event, platform: platform, deadLetter: deadLetter, evenIfCancelled: pushed)
            case .handBack:
                return .handedBack
            }
        }
    }

    // MARK: - Runs

    /// Processes a run of one partition's events, their intake done in order, reporting each
    /// event's result through `finished` (`(index, result)` pairs, those known together in one
    /// call) as soon as it is known (its offset may be stored then). The rules are those of `process(_:event:)`, event by event; what is shared is
    /// the work: the rings' dedupe, payload and admission are done in one pass, their first pushes
    /// go to the sender in one call, and the outcomes that need nothing but a status — `sent`,
    /// `duplicate` — are written in batches, each acknowledged on its own: the duplicates at once,
    /// the `sent` ones in waves as the answers arrive (the answers that came in together, written
    /// together), so a slow push delays no other ring of the run. An event that needs
    /// more (a retry and its back-off, a DLQ record, a cancel marker, a rejection, an expiry,
    /// tracing, a status write that failed) continues alone, concurrently, on the per-event path.
    public func process(run items: [(intake: Intake, event: InboundEvent)],
                        finished: @escaping @Sendable ([(Int, DeliveryResult)]) -> Void) async {
        await withTaskGroup(of: Void.self) { alone in
            var pushing: [(index: Int, delivery: Delivery)] = []
            var pushes: [VoIPPush] = []
            var writes: [RunWrite] = []
            var configured: (app: String, platform: DevicePlatform)?  // the last ring's, known to have credentials
            for (index, (intake, event)) in items.enumerated() {
                guard event.trace == nil, case .ring(let ring) = intake,
                      configured.map({ $0.app == ring.app && $0.platform == ring.device.platform }) == true
                        || (settings.apps.contains(ring.app)
                            && (ring.device.platform == .ios ? settings.iosApps : settings.androidApps).contains(ring.app)) else {
                    alone.addTask { finished([(index, await self.process(intake, event: event))]) }
                    continue
                }
                configured = (ring.app, ring.device.platform)
                let at = now()
                switch admit(ring, event: event, at: at) {
                case .duplicate(let status):
                    writes.append(RunWrite(index: index, status: status, event: event, platform: ring.device.platform, pushed: false))
                case .done(let result):
                    alone.addTask { finished([(index, await result())]) }
                case .delivery(let delivery):
                    var action = delivery.machine.begin(now: at, callCancelled: cancels.isCancelled(ring))
                    if case .admit = action { action = admitted(delivery, at: at) }
                    if case .push(let deadline) = action {
                        pushes.append(delivery.push(deadline: deadline))
                        pushing.append((index, delivery))
                    } else {
                        alone.addTask { [action] in
                            finished([(index, await self.drive(delivery, from: action))])
                        }
                    }
                }
            }
            if !writes.isEmpty {
                alone.addTask { [writes] in await self.write(run: writes, finished: finished) }
            }
            guard !pushes.isEmpty else { return }
            // The answers are taken in waves, as they arrive: those that came together are handled
            // together (their `sent` statuses in one write, started as a child task so the next wave
            // is gathered meanwhile), and a slow push holds back none of the others.
            let inbox = RunAnswers()
            let sentAt = ContinuousClock.now
            alone.addTask { [pushes, sender] in
                await sender.send(pushes) { position, attempt in inbox.put(position, attempt) }
                inbox.close()
            }
            var unanswered = [Bool](repeating: true, count: pushing.count)
            var left = pushing.count
            var latencies = WorkerMetrics.PushLatencyBatch()
            while left > 0 {
                var (wave, closed) = await inbox.take()
                if closed {
                    // A sender that returned without answering some pushes: those are retried (nothing is assumed sent).
                    for position in unanswered.indices where unanswered[position] {
                        wave.append((position, PushAttempt(disposition: .retry, reason: "no-answer")))
                    }
                }
                let latency = ContinuousClock.now - sentAt
                let at = now()  // the wave's answers are taken together
                var sent: [RunWrite] = []
                for (position, attempt) in wave where position >= 0 && position < pushing.count && unanswered[position] {
                    unanswered[position] = false
                    left -= 1
                    let (index, delivery) = pushing[position]
                    let action = answered(delivery, attempt, latency: attempt.latency ?? latency, at: at, latencies: &latencies)
                    if case .finish(let outcome, deadLetter: false, let pushed) = action, outcome.state == .sent {
                        logOutcome(outcome, pushed: pushed, delivery)
                        sent.append(RunWrite(index: index, status: outcome, event: delivery.event, platform: delivery.platform, pushed: pushed))
                    } else {
                        alone.addTask {
                            finished([(index, await self.drive(delivery, from: action))])
                        }
                    }
                }
                if !sent.isEmpty {
                    alone.addTask { [sent] in await self.write(run: sent, finished: finished) }
                }
            }
        }
    }

    /// Writes statuses of a run in one batch, reporting those written together; a status the batch
    /// did not write is written again alone, with the retries and fallbacks of `finish`.
    private func write(run writes: [RunWrite], finished: @escaping @Sendable ([(Int, DeliveryResult)]) -> Void) async {
        let results = await publisher.publish(statuses: writes.map {
            StatusRecord(status: $0.status, partition: $0.event.partition, headers: $0.event.outcomeTraceHeaders(nil))
        })
        var written: [(Int, DeliveryResult)] = []
        written.reserveCapacity(writes.count)
        var failed: [RunWrite] = []
        var outcomes = WorkerMetrics.OutcomeBatch()
        // By position, not copied out one by one: a write holds a status and an event.
        for position in writes.indices {
            if position < results.count, case .success = results[position] {
                outcomes.add(app: appLabel(writes[position].status.app), platform: writes[position].platform,
                             state: writes[position].status.state, reason: Self.reason(of: writes[position].status), to: metrics)
                written.append((writes[position].index, .finished(writes[position].status.state)))
            } else {
                failed.append(writes[position])
            }
        }
        outcomes.flush(to: metrics)
        if !written.isEmpty {
            health?.recordWrite(succeeded: true)
            finished(written)
        }
        guard !failed.isEmpty else { return }
        await withTaskGroup(of: Void.self) { alone in
            for write in failed {
                // A pushed ring's outcome is written even once the delivery is cancelled (the next owner would ring again).
                alone.addTask {
                    finished([(write.index, await self.finish(write.status, event: write.event, platform: write.platform,
                                                              evenIfCancelled: write.pushed))])
                }
            }
        }
    }

    /// Where a run's push answers gather until the run takes them: all those buffered at once,
    /// suspending only while there is none (one waiter, the run's task).
    private final class RunAnswers: Sendable {
        typealias Wave = (answers: [(Int, PushAttempt)], closed: Bool)
        private struct State {
            var answers: [(Int, PushAttempt)] = []
            var closed = false
            var waiter: CheckedContinuation<Wave, Never>?
        }
        private let state = Locked(State())

        /// An answer of the push at `position`.
        func put(_ position: Int, _ attempt: PushAttempt) {
            let woken = state.withLock { state -> (CheckedContinuation<Wave, Never>, Wave)? in
                state.answers.append((position, attempt))
                return Self.wake(&state)
            }
            if let (waiter, wave) = woken { waiter.resume(returning: wave) }
        }

        /// The sender returned: no answer will follow.
        func close() {
            let woken = state.withLock { state -> (CheckedContinuation<Wave, Never>, Wave)? in
                state.closed = true
                return Self.wake(&state)
            }
            if let (waiter, wave) = woken { waiter.resume(returning: wave) }
        }

        /// Everything gathered so far (and whether the sender has returned); waits while there is nothing.
        func take() async -> Wave {
            await withCheckedContinuation { (waiter: CheckedContinuation<Wave, Never>) in
                let wave = state.withLock { state -> Wave? in
                    guard state.answers.isEmpty, !state.closed else {
                        defer { state.answers = [] }
                        return (state.answers, state.closed)
                    }
                    state.waiter = waiter
                    return nil
                }
                if let wave { waiter.resume(returning: wave) }
            }
        }

        private static func wake(_ state: inout State) -> (CheckedContinuation<Wave, Never>, Wave)? {
            guard let waiter = state.waiter else { return nil }
            state.waiter = nil
            defer { state.answers = [] }
            return (waiter, (state.answers, state.closed))
        }
    }

    /// A status of a run written in its batch.
    private struct RunWrite: Sendable {
        var index: Int
        var status: CallStatus
        var event: InboundEvent
        var platform: DevicePlatform
        /// A push of the delivery was answered: the outcome is written even if it is cancelled.
        var pushed: Bool
    }

    /// An outcome's reason label in the metrics: its error code, else APNs' or FCM's reason.
    private static func reason(of status: CallStatus) -> String? {
        status.error?.code ?? status.apns?.reason ?? status.fcm?.errorCode
    }

    /// Error code of a delivery not pushed because its app is suspended (`CredentialCircuit`).
    public static let suspendedCode = "app-suspended"
    /// DLQ error code of an event whose status could not be written (the status topic refused it).
    public static let statusUnwritableCode = "status-unwritable"
    /// The bytes of the original request kept when the whole does not fit the DLQ topic.
    static let truncatedBytes = 1_024

    private func recordCredentialEvidence(_ evidence: CredentialCircuit.Evidence, scope: CredentialScope, probe: Bool, reason: String?,
                                          at: Date) {
        if let until = credentials.record(scope, evidence, probe: probe, now: at) {
            logger.error("\(scope.service) refused the app's credentials; its pushes are suspended with this credential (fix the key, certificate or service account, then replay the DLQ)",
                         metadata: ["app": "\(scope.app)", "push.platform": "\(scope.platform.rawValue)",
                                    "apns.environment": "\(scope.environment?.rawValue ?? "-")",
                                    "push.reason": "\(reason ?? "-")", "suspended.until": "\(ContractCoding.format(until))"])
        } else if probe, evidence == .accepted {
            logger.notice("\(scope.service) accepted the app's credentials again; pushes resumed",
                          metadata: ["app": "\(scope.app)", "push.platform": "\(scope.platform.rawValue)",
                                     "apns.environment": "\(scope.environment?.rawValue ?? "-")"])
        }
    }

    // MARK: - Outcomes

    /// The app as a metric label: configured apps only, so an event cannot add label values.
    private func appLabel(_ app: String?) -> String? {
        guard let app else { return nil }
        return settings.apps.contains(app) ? app : "unknown"
    }

    /// An invalid event: a DLQ record and, when a call id can be read, a `rejected` status.
    private func reject(_ event: InboundEvent, error: ContractError, ring: RingRequest? = nil) async -> DeliveryResult {
        event.trace?.span.attributes[SpanAttributeName.errorCode] = error.code.rawValue
        logger.warning("event rejected", metadata: [
            "call.id": "\(ring?.callId ?? event.keyAsCallID ?? "-")", "kafka.partition": "\(event.partition)",
            "kafka.offset": "\(event.offset)", "error.code": "\(error.code.rawValue)", "error.reason": "\(error.description)",
        ])
        let errorInfo = CallStatus.ErrorInfo(code: error.code.rawValue, message: error.description)
        guard let callId = ring?.callId ?? event.keyAsCallID else {
            switch await deadLetter(event, error: errorInfo, attempts: 0, platform: nil, evenIfCancelled: false) {
            case .handedBack: return .handedBack
            case .written, .refused: return .finished(.rejected)
            }
        }
        let status = CallStatus(callId: callId, deviceId: ring?.device.id,
                                deviceKey: ring.map { DeviceKey.make(token: $0.device.token) }, app: ring?.app,
                                state: .rejected, attempt: 0, replay: ring?.replay ?? 0, at: now(),
                                error: errorInfo, worker: settings.workerID, tenant: ring?.tenant)
        return await finish(status, event: event, platform: ring?.device.platform, deadLetter: true)
    }

    /// Writes the outcome durably: the DLQ record first (when asked), then the status.
    ///
    /// A record the topic will never take (`OutcomeWriteFailure.permanent`) ends the delivery
    /// anyway, so one bad record cannot hold its partition for ever:
    /// - a DLQ record too large for the topic is written again with only its first
    ///   `truncatedBytes` bytes and `callpush-original-bytes` (the original stays at its partition
    ///   and offset, named in the headers); a DLQ record refused even so is logged at critical;
    /// - a status that cannot be written sends the event to the DLQ (when it is not there yet) with
    ///   error `status-unwritable`, so the event is kept for replay.
    private func finish(_ status: CallStatus, event: InboundEvent, platform: DevicePlatform?, deadLetter: Bool = false,
                        evenIfCancelled: Bool = false) async -> DeliveryResult {
        var deadLettered = false
        if deadLetter {
            switch await self.deadLetter(event, error: status.error ?? .init(code: status.state.rawValue), attempts: status.attempt, platform: platform,
                                         evenIfCancelled: evenIfCancelled) {
            case .handedBack: return .handedBack
            case .written: deadLettered = true
            case .refused: break
            }
        }
        switch await writeStatus(status, event: event, evenIfCancelled: evenIfCancelled) {
        case .handedBack:
            return .handedBack
        case .written:
            metrics?.outcome(app: appLabel(status.app), platform: platform, state: status.state, reason: Self.reason(of: status))
        case .refused(let code):
            logger.critical("the status topic refused the outcome; the event goes to the DLQ instead", metadata: [
                "call.id": "\(status.callId)", "call.state": "\(status.state.rawValue)", "kafka.partition": "\(event.partition)",
                "kafka.offset": "\(event.offset)", "kafka.error.code": "\(code)",
            ])
            if !deadLettered {
                let error = CallStatus.ErrorInfo(code: Self.statusUnwritableCode,
                                                 message: "the \(status.state.rawValue) status could not be written: \(code)")
                if case .handedBack = await self.deadLetter(event, error: error, attempts: status.attempt, platform: platform,
                                                            evenIfCancelled: evenIfCancelled) {
                    return .handedBack
                }
            }
        }
        return .finished(status.state)
    }

    /// Dead-letters the event's original bytes (or, when the topic refuses them, a prefix).
    private func deadLetter(_ event: InboundEvent, error: CallStatus.ErrorInfo, attempts: Int, platform: DevicePlatform?,
                            evenIfCancelled: Bool) async -> WriteOutcome {
        var headers = [
            (DeadLetterHeader.error, error.code),
            (DeadLetterHeader.reason, error.message ?? error.code),
            (DeadLetterHeader.attempts, String(attempts)),
            (DeadLetterHeader.originalPartition, String(event.partition)),
            (DeadLetterHeader.originalOffset, String(event.offset)),
            (DeadLetterHeader.failedAt, ContractCoding.format(now())),
        ]
        let span = event.trace?.child(SpanName.writeDeadLetter, kind: .producer)
        span?.attributes[SpanAttributeName.errorCode] = error.code
        defer { span?.end() }
        headers += event.outcomeTraceHeaders(span)
        var outcome = await durably({ [headers] in try await publisher.deadLetter(key: event.key, value: event.value, headers: headers, within: $0) },
                                    evenIfCancelled: evenIfCancelled)
        if case .refused = outcome, event.value.count > Self.truncatedBytes {
            headers.append((DeadLetterHeader.originalBytes, String(event.value.count)))
            let prefix = Array(event.value.prefix(Self.truncatedBytes))
            outcome = await durably({ [headers] in try await publisher.deadLetter(key: event.key, value: prefix, headers: headers, within: $0) },
                                    evenIfCancelled: evenIfCancelled)
        }
        switch outcome {
        case .written:
            metrics?.deadLetter(code: error.code, platform: platform)
        case .refused(let code):
            logger.critical("the DLQ topic refused the event; it stays only in the request topic", metadata: [
                "kafka.partition": "\(event.partition)", "kafka.offset": "\(event.offset)", "error.code": "\(error.code)",
                "kafka.error.code": "\(code)",
            ])
        case .handedBack:
            break
        }
        return outcome
    }

    /// Writes a status durably, in a `write status` span of the event's trace, the record carrying
    /// the trace's context (or, untraced, the request's `traceparent`) in its headers.
    private func writeStatus(_ status: CallStatus, event: InboundEvent, evenIfCancelled: Bool = false) async -> WriteOutcome {
        let span = event.trace?.child(SpanName.writeStatus, kind: .producer)
        span?.attributes[SpanAttributeName.state] = status.state.rawValue
        span?.attributes[SpanAttributeName.partition] = "\(event.partition)"
        let headers = event.outcomeTraceHeaders(span)
        let outcome = await durably({ try await publisher.publish(status: status, partition: event.partition, headers: headers, within: $0) },
                                    evenIfCancelled: evenIfCancelled)
        if let span {
            if case .written = outcome {} else { span.fail("status not written") }
            span.end()
        }
        return outcome
    }

    enum WriteOutcome {
        case written
        /// The delivery was cancelled before the write was acknowledged.
        case handedBack
        /// The topic will never accept the record (`OutcomeWriteFailure.permanent`).
        case refused(code: String)
    }

    /// Retries a write until it is acknowledged, or the topic refuses it for good. Without
    /// `evenIfCancelled` it gives up when the task is cancelled (nothing was pushed: the next owner
    /// redoes the event). With it — a push went out, so its outcome must be recorded or the next
    /// owner would ring again — it keeps retrying while the delivery runs (a Kafka outage longer
    /// than any bound must not strand a delivery that nobody redoes while this worker keeps the
    /// partition), and once the delivery is cancelled (revoke, shutdown) the write goes on in a
    /// task that does not inherit the cancellation, bounded by `outcomeWriteBound`.
    /// The write gets the time left to its bound (nil: none), so no single send outlives it.
    private func durably(_ write: @escaping @Sendable (Duration?) async throws -> Void, evenIfCancelled: Bool = false) async -> WriteOutcome {
        guard evenIfCancelled else { return await retrying(write, until: nil) }
        if !Task.isCancelled {
            let outcome = await retrying(write, until: nil)
            if case .handedBack = outcome {} else { return outcome }
        }
        let deadline = ContinuousClock.now + settings.outcomeWriteBound
        return await Task { await self.retrying(write, until: deadline) }.value
    }

    private func retrying(_ write: @Sendable (Duration?) async throws -> Void, until deadline: ContinuousClock.Instant?) async -> WriteOutcome {
        var delay = 0.05
        while true {
            do {
                try await write(deadline.map { max(.milliseconds(1), $0 - ContinuousClock.now) })
                health?.recordWrite(succeeded: true)
                return .written
            } catch {
                if case .permanent(let code) = publisher.classify(error) {
                    metrics?.outcomeWriteRefused(code: code)
                    return .refused(code: code)
                }
                health?.recordWrite(succeeded: false)
                let (log, suppressed) = health?.shouldLogWriteFailure() ?? (true, 0)
                if log {
                    logger.error("could not write outcome to Kafka; retrying",
                                 metadata: ["error": "\(error)", "failures.not_logged": "\(suppressed)"])
                }
            }
            if Task.isCancelled { return .handedBack }
            if let deadline, ContinuousClock.now + .seconds(delay) > deadline { return .handedBack }
            try? await Task.sleep(for: .seconds(delay))
            delay = min(delay * 2, 2)
        }
    }
}

/// The log lines of one delivery, keyed by the call, with the device as a key — never the token.
/// The keyed metadata is built only when a line is written: building it for every delivery cost
/// CPU on every ring at a level where nothing is logged.
struct DeliveryLog {
    let logger: Logger
    /// The ring's fields its lines carry (not the whole ring: a delivery keeps it once).
    let callId: String
    let replay: Int
    let app: String
    let deviceKey: String

    init(logger: Logger, ring: RingRequest, deviceKey: String) {
        self.logger = logger
        self.callId = ring.callId
        self.replay = ring.replay
        self.app = ring.app
        self.deviceKey = deviceKey
    }

    func callAsFunction(_ level: Logger.Level, _ message: @autoclosure () -> Logger.Message,
                        metadata: @autoclosure () -> Logger.Metadata = [:]) {
        guard logger.logLevel <= level else { return }
        var keyed = logger
        // One metadata write, not four: a handler may re-render its metadata on every change (swift-log's
        // StreamLogHandler does).
        var all = keyed.handler.metadata
        all["call.id"] = "\(callId)"
        all["device.key"] = "\(deviceKey.prefix(12))"
        all["call.replay"] = "\(replay)"
        all["app"] = "\(app)"
        keyed.handler.metadata = all
        keyed.log(level: level, message(), metadata: metadata())
    }
}
