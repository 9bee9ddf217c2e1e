import CallContract
import Foundation
import ProcessStack
import Kafka
import Locking

/// The faults of one campaign, scheduled over the load: one cycle of every fault kind per
/// `cycle` (≈ 80 s), repeated while the load lasts (`--long` runs several cycles). The load rings
/// iPhones through the APNs simulator and Android phones through the FCM simulator (every third
/// call has an Android phone, some an iPhone too).
///
/// A cycle, as fractions of its length (the rolling restart runs alongside the APNs faults):
/// - 0.03 invalid events (kcat); the cycle's doomed calls (iPhones the APNs simulator refuses with
///   `BadDeviceToken`, Android phones the FCM simulator refuses with `UNREGISTERED`) and calls
///   with a sandbox device the key is not valid for;
/// - 0.10 SIGKILL of a worker, a new run 3 s later; 0.15 FCM 503 (`UNAVAILABLE`);
/// - 0.20 half of each platform's doomed calls cancelled (after their `failed` status), the
///   refusals lifted;
/// - 0.24 broker 1 down; 0.30 FCM 429 (`QUOTA_EXCEEDED`, `Retry-After: 1`); 0.34 partition leaders move (produce requests refused with
///   `NOT_LEADER_FOR_PARTITION`) and OffsetCommit request errors; 0.40 broker 2 slow;
/// - 0.46 rolling restart of every worker (SIGTERM, a new run with a new identity, one after
///   another): the first replacement's producer hits a fatal error, the second's assignment is
///   slow (the odd status partitions without a leader for 6 s); then the DLQ replay of the doomed
///   calls (`BadDeviceToken`, then `UNREGISTERED`);
/// - 0.50 APNs simulator 503; 0.54 FCM latency 300–800 ms; 0.60 APNs GOAWAY; 0.70 APNs
///   connection resets; 0.76 FCM access tokens revoked (the next sends answer 401) and the token
///   endpoint refusing the next 2 grants (503); 0.80 APNs latency;
/// - 0.88 invalid events.
///
/// The FCM faults run beside the others (``runFCMFaults(from:length:hold:)``); the 503, the 429 and
/// the latency last at least 3 s (4.8 s for the latency) and until the FCM simulator answered 5
/// messages with them, at most 10 s. The FCM simulator has no connection faults (GOAWAY, resets),
/// so FCM gets none. Each FCM fault is
/// checked to have taken effect from the FCM simulator's counters (`GET /admin/stats`) and the
/// Android statuses (``FaultPlan/checkFCMEffects(calls:messages:)``).
final class FaultPlan: Sendable {
    /// One injected fault, for the report.
    struct Injected: Sendable {
        var at: Date
        var kind: String
    }

    /// A call the campaign doomed: dead-lettered, then replayed (after a cancel for some).
    struct Doomed: Sendable {
        var callId: String
        var tokens: [String]
        var cycle: Int
        var platform: CallLoad.Platform
    }

    let stack: Stack
    let load: CallLoad
    let collector: OutcomeCollector
    let simulator: SimulatorFaults
    /// The FCM simulator's faults (its windows are left out of the Android rings' `max_ring_ms`).
    let fcm: SimulatorFaults
    private let directory: String
    /// Worker slot that runs with a small dedupe capacity (its evictions are counted).
    let smallDedupeSlot: Int?
    private let injected = Locked<[Injected]>([])
    private let invalid = Locked<[InvalidEvents.Event]>([])
    private let problems = Locked<[String]>([])
    private let notes = Locked<[String]>([])
    private let doomed = Locked<[Doomed]>([])
    /// Cycles whose DLQ replay ran.
    private let replayedCycles = Locked<Set<Int>>([])
    private let evictions = Locked(0.0)

    /// Length of a fault cycle (the CI mode's whole load is one).
    static let cycleSeconds = 80.0
    /// Doomed calls per cycle and platform (half of each are cancelled) and env-mismatched calls per cycle.
    static let doomedPerCycle = 6
    static let doomedAndroidPerCycle = 4
    static let mismatchedPerCycle = 3
    /// How long the slow-assignment fault keeps status partitions without a leader. Below the
    /// worker's outcome-write bound after a revoke (10 s), so a `sent` written meanwhile is still
    /// durable before its partition moves.
    static let leaderlessHold = Duration.seconds(6)

    init(stack: Stack, load: CallLoad, collector: OutcomeCollector, directory: String, smallDedupeSlot: Int?) {
        self.stack = stack
        self.load = load
        self.collector = collector
        self.directory = directory
        self.smallDedupeSlot = smallDedupeSlot
        simulator = SimulatorFaults(http: stack.http, adminURL: stack.adminURL)
        fcm = SimulatorFaults(http: stack.http, adminURL: stack.fcmAdminURL)
    }

    var faults: [Injected] { injected.withLock { $0 } }
    var invalidEvents: [InvalidEvents.Event] { invalid.withLock { $0 } }
    /// Fault injections that themselves failed or did not take effect (reported; not faults).
    var injectionProblems: [String] { problems.withLock { $0 } }
    /// What the faults were seen to do (reported).
    var effects: [String] { notes.withLock { $0 } }
    /// When workers were SIGKILLed.
    var killTimes: [Date] { faults.filter { $0.kind.hasPrefix("sigkill") }.map(\.at) }
    /// Doomed calls whose cycle's replay ran.
    var replayedDoomed: [Doomed] {
        let cycles = replayedCycles.withLock { $0 }
        return doomed.withLock { $0 }.filter { cycles.contains($0.cycle) }
    }
    /// Dedupe evictions of the small-capacity worker's runs (scraped before each stop).
    var dedupeEvictions: Int { Int(evictions.withLock { $0 }) }

    /// Runs the schedule for `duration`, starting now.
    func run(duration: Duration) async {
        let cycle = min(duration, .seconds(Self.cycleSeconds))
        let start = ContinuousClock.now
        var cycleStart = start
        var number = 0
        while cycleStart + cycle <= start + duration + .seconds(1) {
            await runCycle(number: number, from: cycleStart, length: cycle)
            number += 1
            cycleStart = cycleStart + cycle
        }
    }

    /// What the faults were seen to do, with the checks only the end of the run can make: the
    /// small-capacity worker's evictions, the sandbox suspensions and the production rings
    /// meanwhile, the cancels. Records a problem for a fault that did not take effect.
    func effectsAtEnd(pushes: [SimulatorPush], calls: [CallLoad.Call], replayed: Int) async -> [String] {
        if let slot = smallDedupeSlot { await scrapeEvictions(slot: slot) }
        var lines = effects
        if let slot = smallDedupeSlot {
            lines.append("\(Stack.workerName(slot)) (\(stack.workerEnvironment[slot]?["CALLPUSH_DEDUPE_CAPACITY"] ?? "?") dedupe entries in total): "
                         + "\(dedupeEvictions) dedupe evictions")
            if dedupeEvictions == 0 { problem("the small dedupe capacity evicted nothing") }
        }
        let suspensions = sandboxSuspensions()
        if suspensions.isEmpty { problem("no worker suspended the app's sandbox pushes: the mismatched devices were not refused") }
        let regularTokens = Set(calls.filter { $0.kind == .regular }.flatMap { $0.devices.keys })
        let ringingMeanwhile = pushes.filter { push in
            regularTokens.contains(push.deviceToken.lowercased()) && suspensions.contains { $0.contains(push.receivedAt) }
        }.count
        lines.append("the app's sandbox pushes were suspended \(suspensions.count) time(s) (BadEnvironmentKeyInToken); "
                     + "production rings accepted by the simulator meanwhile: \(ringingMeanwhile)")
        lines.append("cancels accepted: \(load.cancelAccepted.count) (before the ring: \(calls.filter { $0.kind == .cancelledFirst }.count); "
                     + "doomed calls replayed: \(replayed))")
        return lines
    }

    /// Adds the small-capacity worker's evictions so far (call before its run ends).
    func scrapeEvictions(slot: Int) async {
        guard slot == smallDedupeSlot, let value = await stack.workerMetric(slot, "callpush_worker_dedupe_evictions_total") else { return }
        evictions.withLock { $0 += value }
    }

    private func at(_ origin: ContinuousClock.Instant, _ length: Duration, _ fraction: Double) async {
        try? await Task.sleep(until: origin + length * fraction)
    }

    private func runCycle(number: Int, from origin: ContinuousClock.Instant, length: Duration) async {
        let hold = min(.seconds(5), length * 0.06)
        // The FCM faults run beside the rest: one kept in force until Android rings met it must
        // not shift the others.
        async let fcmFaults: Void = runFCMFaults(from: origin, length: length, hold: hold)
        await at(origin, length, 0.03)
        await step("invalid events (kcat)") {
            let events = InvalidEvents.batch(tag: "c\(number)")
            try await InvalidEvents.produce(events, bootstrap: self.stack.cluster.bootstrapServers, directory: self.directory)
            self.invalid.withLock { $0 += events }
        }
        await step("\(Self.doomedPerCycle) doomed iPhone calls (BadDeviceToken), \(Self.doomedAndroidPerCycle) doomed Android calls (UNREGISTERED) "
                   + "and \(Self.mismatchedPerCycle) calls with a sandbox device the key is not valid for") {
            try await self.ringDoomedAndMismatched(cycle: number)
        }
        await at(origin, length, 0.10)
        let victim = number % stack.workerPorts.count
        await step("sigkill \(Stack.workerName(victim)) + new run 3 s later") {
            await self.scrapeEvictions(slot: victim)
            self.stack.current(Stack.workerName(victim))?.kill()
            try await Task.sleep(for: .seconds(3))
            try self.stack.startWorker(victim)
        }
        await at(origin, length, 0.20)
        await step("cancel half of the doomed calls after their failure; lift the refusal") {
            try await self.cancelDoomed(cycle: number)
        }
        await at(origin, length, 0.24)
        await step("broker 1 down for \(hold)") {
            try self.stack.cluster.setBrokerDown(1)
            try await Task.sleep(for: hold)
            try self.stack.cluster.setBrokerUp(1)
        }
        await at(origin, length, 0.34)
        // Produce errors come from leader moves, not from `pushRequestErrors(apiKey: .produce)`: the
        // embedded cluster does not check idempotent producers' sequence numbers, so an injected
        // error on one request while a later one is in flight loses a message the producer reports
        // delivered (docs/kafka.md), which a real broker prevents.
        await step("partition leaders of both topics move to the next broker for \(hold) (NOT_LEADER_FOR_PARTITION)") {
            try self.moveLeaders { Stack.pinnedLeader($0) % 3 + 1 }
            try await Task.sleep(for: hold)
            try self.moveLeaders { Stack.pinnedLeader($0) }
        }
        await step("offset-commit request errors") {
            try self.stack.cluster.pushRequestErrors(apiKey: .offsetCommit, errors: [
                "REQUEST_TIMED_OUT", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"])
        }
        await at(origin, length, 0.40)
        await step("broker 2 round trip +300 ms for \(hold)") {
            try self.stack.cluster.setBrokerRoundTripTime(2, .milliseconds(300))
            try await Task.sleep(for: hold)
            try self.stack.cluster.setBrokerRoundTripTime(2, .zero)
        }
        await at(origin, length, 0.46)
        async let restartAndReplay: Void = rollingRestartThenReplay(cycle: number)
        await at(origin, length, 0.50)
        await simulatorFault("simulator 503 for 3 s", #"{"errorRate":{"status":503,"probability":1.0}}"#, hold: .seconds(3))
        await at(origin, length, 0.60)
        await simulatorFault("simulator GOAWAY every 10 streams", #"{"goAwayAfterStreams":10}"#, hold: hold)
        await at(origin, length, 0.70)
        await simulatorFault("simulator drops connections at stream 8", #"{"dropConnectionAfterStreams":8}"#, hold: hold)
        await at(origin, length, 0.80)
        await simulatorFault("simulator latency 50-600 ms",
                             #"{"latency":{"shape":"uniform","minimumMilliseconds":50,"maximumMilliseconds":600}}"#, hold: hold)
        await at(origin, length, 0.88)
        await step("invalid events (kcat)") {
            let events = InvalidEvents.batch(tag: "c\(number)b")
            try await InvalidEvents.produce(events, bootstrap: self.stack.cluster.bootstrapServers, directory: self.directory)
            self.invalid.withLock { $0 += events }
        }
        await restartAndReplay
        await fcmFaults
    }

    /// The cycle's FCM outages, at fractions where the APNs simulator has no fault. Each is kept in
    /// force for at least its length and until the FCM simulator answered it to some messages (at
    /// most 10 s): Android rings pause while the embedded cluster rebalances, and an outage no ring
    /// met shows nothing.
    private func runFCMFaults(from origin: ContinuousClock.Instant, length: Duration, hold: Duration) async {
        await at(origin, length, 0.15)
        await fcmFault("FCM 503 (UNAVAILABLE)", #"{"errorRate":{"error":{"errorCode":"UNAVAILABLE"},"probability":1.0}}"#,
                       hold: .seconds(3), until: .rejected("UNAVAILABLE", 5))
        await at(origin, length, 0.30)
        await fcmFault("FCM 429 (QUOTA_EXCEEDED, Retry-After 1 s)",
                       #"{"errorRate":{"error":{"errorCode":"QUOTA_EXCEEDED","retryAfterSeconds":1},"probability":1.0}}"#,
                       hold: .seconds(3), until: .rejected("QUOTA_EXCEEDED", 5))
        await at(origin, length, 0.54)
        await fcmFault("FCM latency 300-800 ms", #"{"latency":{"minimumMilliseconds":300,"maximumMilliseconds":800}}"#,
                       hold: hold, until: .accepted(5))
        await at(origin, length, 0.76)
        await revokeFCMAccessTokens(hold: hold)
    }

    private func moveLeaders(to broker: (Int32) -> Int32) throws {
        for topic in [Topics.requests, Topics.status] {
            for partition in 0..<Int32(Stack.partitions) {
                try stack.cluster.setPartitionLeader(topic: topic, partition: partition, broker: broker(partition))
            }
        }
    }

    private func simulatorFault(_ kind: String, _ json: String, hold: Duration) async {
        await step(kind) {
            try await self.simulator.begin(kind, json)
            try await Task.sleep(for: hold)
            try await self.simulator.end()
        }
    }

    func step(_ kind: String, _ body: () async throws -> Void) async {
        let at = Date()
        let elapsed = stack.elapsed
        say("  [\(String(format: "%6.1f", elapsed))s] fault: \(kind)")
        do {
            try await body()
            injected.withLock { $0.append(Injected(at: at, kind: kind)) }
        } catch {
            problem("\(kind): \(error)")
        }
    }

    func problem(_ text: String) {
        problems.withLock { $0.append(text) }
        say("  [\(String(format: "%6.1f", stack.elapsed))s] fault injection problem: \(text)")
    }

    func note(_ text: String) {
        notes.withLock { $0.append(text) }
        say("  [\(String(format: "%6.1f", stack.elapsed))s]   \(text)")
    }

    /// Records a fault injected inside a larger step.
    func recordInjection(_ kind: String) {
        say("  [\(String(format: "%6.1f", stack.elapsed))s] fault: \(kind)")
        injected.withLock { $0.append(Injected(at: Date(), kind: kind)) }
    }

    func markReplayed(cycle: Int) { _ = replayedCycles.withLock { $0.insert(cycle) } }
    func addDoomed(_ calls: [Doomed]) { doomed.withLock { $0 += calls } }
    func doomedCalls(cycle: Int) -> [Doomed] { doomed.withLock { $0 }.filter { $0.cycle == cycle } }
}
