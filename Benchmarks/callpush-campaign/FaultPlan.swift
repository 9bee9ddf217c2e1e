import Foundation
import Kafka
import Locking

/// The faults of one campaign, scheduled over the load: one cycle of every fault kind per
/// `cycle` (≈ 80 s), repeated while the load lasts (`--long` runs several cycles).
final class FaultPlan: Sendable {
    /// One injected fault, for the report.
    struct Injected: Sendable {
        var at: Date
        var kind: String
    }

    private let stack: Stack
    private let directory: String
    private let injected = Locked<[Injected]>([])
    private let invalid = Locked<[InvalidEvents.Event]>([])
    private let problems = Locked<[String]>([])

    init(stack: Stack, directory: String) {
        self.stack = stack
        self.directory = directory
    }

    var faults: [Injected] { injected.withLock { $0 } }
    var invalidEvents: [InvalidEvents.Event] { invalid.withLock { $0 } }
    /// Fault injections that themselves failed (reported; they do not count as faults).
    var injectionProblems: [String] { problems.withLock { $0 } }
    /// When workers were SIGKILLed.
    var killTimes: [Date] { faults.filter { $0.kind.hasPrefix("sigkill") }.map(\.at) }

    /// Runs the schedule for `duration`, starting now.
    func run(duration: Duration) async {
        let cycle = min(duration, .seconds(80))
        let start = ContinuousClock.now
        var cycleStart = start
        var number = 0
        while cycleStart + cycle <= start + duration + .seconds(1) {
            await runCycle(number: number, from: cycleStart, length: cycle)
            number += 1
            cycleStart = cycleStart + cycle
        }
    }

    private func at(_ origin: ContinuousClock.Instant, _ length: Duration, _ fraction: Double) async {
        try? await Task.sleep(until: origin + length * fraction)
    }

    private func runCycle(number: Int, from origin: ContinuousClock.Instant, length: Duration) async {
        let hold = min(.seconds(5), length * 0.06)
        await at(origin, length, 0.04)
        await step("invalid events (kcat)") {
            let events = InvalidEvents.batch(tag: "c\(number)")
            try await InvalidEvents.produce(events, bootstrap: self.stack.cluster.bootstrapServers, directory: self.directory)
            self.invalid.withLock { $0 += events }
        }
        await at(origin, length, 0.10)
        let victim = number % stack.workerPorts.count
        await step("sigkill \(Stack.workerName(victim)) + restart") {
            self.stack.current(Stack.workerName(victim))?.kill()
            try await Task.sleep(for: .seconds(3))
            try self.stack.startWorker(victim)
        }
        await at(origin, length, 0.24)
        await step("broker 1 down for \(hold)") {
            try self.stack.cluster.setBrokerDown(1)
            try await Task.sleep(for: hold)
            try self.stack.cluster.setBrokerUp(1)
        }
        await at(origin, length, 0.34)
        await step("produce request errors") {
            try self.stack.cluster.pushRequestErrors(apiKey: .produce, errors: [
                "REQUEST_TIMED_OUT", "NOT_LEADER_FOR_PARTITION", "NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT"])
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
    }

    private func simulatorFault(_ kind: String, _ json: String, hold: Duration) async {
        await step(kind) {
            try await self.putFaults(json)
            try await Task.sleep(for: hold)
            try await self.putFaults("{}")
        }
    }

    private func putFaults(_ json: String) async throws {
        let response = try await stack.http.send("PUT", "\(stack.adminURL)/faults", body: Data(json.utf8))
        guard response.status == 200 || response.status == 204 else {
            throw CampaignError("PUT /admin/faults \(json) answered \(response.status)")
        }
    }

    private func step(_ kind: String, _ body: () async throws -> Void) async {
        let at = Date()
        let elapsed = stack.elapsed
        do {
            try await body()
            injected.withLock { $0.append(Injected(at: at, kind: kind)) }
            say("  [\(String(format: "%6.1f", elapsed))s] fault: \(kind)")
        } catch {
            problems.withLock { $0.append("\(kind): \(error)") }
            say("  fault \(kind) could not be injected: \(error)")
        }
    }
}
