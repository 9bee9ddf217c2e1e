import CallContract
import Foundation
import ProcessStack
import Kafka
import Locking

/// Worker faults: the rolling restart, with a producer fatal error and a slow assignment on two
/// of its steps.
extension FaultPlan {
    /// The rolling restart, then (every worker having started since the cancels) the DLQ replay.
    func rollingRestartThenReplay(cycle: Int) async {
        await step("rolling restart of every worker (SIGTERM, new run with a new identity, one after another)") {
            try await self.rollingRestart()
        }
        await step("replay the doomed calls from the DLQ (callpush replay) after their cancels and the restart") {
            try await self.replayDoomed(cycle: cycle)
        }
    }

    /// What a Deployment rollout with `maxUnavailable: 1, maxSurge: 0` does: for each worker in
    /// turn, SIGTERM (it drains, commits and leaves the group), wait for its exit, start its
    /// replacement (new worker id, new group member), wait until the replacement is ready.
    private func rollingRestart() async throws {
        let began = ContinuousClock.now
        for index in stack.workerPorts.indices {
            let name = Stack.workerName(index)
            await scrapeEvictions(slot: index)
            let exit = await stack.current(name)?.stop(timeout: .seconds(40))
            if exit != .status(0) { note("\(name) ended with \(exit.map { "\($0)" } ?? "no exit") after SIGTERM") }
            var leaderless: Task<Void, Never>?
            let leaderlessFrom = Date()
            switch index {
            case 0:
                // The next InitProducerId is the replacement's idempotent producer starting: fatal.
                try stack.cluster.pushRequestErrors(apiKey: .initProducerID, errors: ["CLUSTER_AUTHORIZATION_FAILED"])
                recordInjection("status producer fatal error (InitProducerId CLUSTER_AUTHORIZATION_FAILED) for \(name)'s replacement")
            case 1:
                leaderless = try takeStatusLeaders()
            default:
                break
            }
            let started = ContinuousClock.now
            let identity = try stack.startWorker(index)
            do {
                try await stack.waitForWorker(index, timeout: .seconds(90))
                note("\(identity) ready \(String(format: "%.1f", (ContinuousClock.now - started).inSeconds)) s after its start")
            } catch {
                problem("rolling restart: \(identity) not ready: \(error)")
            }
            if index == 0 { await checkProducerReplaced(identity) }
            await leaderless?.value
            if leaderless != nil { await checkSlowRebuilds(since: leaderlessFrom) }
        }
        note("rolling restart took \(String(format: "%.1f", (ContinuousClock.now - began).inSeconds)) s")
    }

    /// Takes the leaders of the odd status partitions away now and gives them back after
    /// ``leaderlessHold``: the dedupe rebuilds of the assignments meanwhile wait for them. Every
    /// range the eager `range` assignor hands out to two or three members holds an odd partition,
    /// so every assignment meanwhile waits.
    private func takeStatusLeaders() throws -> Task<Void, Never> {
        let partitions = (0..<Int32(Stack.partitions)).filter { $0 % 2 == 1 }
        for partition in partitions {
            try stack.cluster.setPartitionLeader(topic: Topics.status, partition: partition, broker: -1)
        }
        recordInjection("slow assignment: status partitions \(partitions) without a leader for \(Self.leaderlessHold) around a replacement")
        return Task {
            try? await Task.sleep(for: Self.leaderlessHold)
            for partition in partitions {
                do {
                    try stack.cluster.setPartitionLeader(topic: Topics.status, partition: partition, broker: Stack.pinnedLeader(partition))
                } catch {
                    problem("could not give status partition \(partition) its leader back: \(error)")
                }
            }
        }
    }

    /// The slow-assignment fault took effect when a dedupe rebuild meanwhile waited for the status
    /// leaders: the survivors' (the partitions move to them when the worker leaves) or the
    /// replacement's (when it joins).
    private func checkSlowRebuilds(since: Date) async {
        // A rebuild that waited logs when it ends, just after the leaders are back.
        let deadline = ContinuousClock.now + .seconds(10)
        var slowest: (ms: Int, run: String)?
        repeat {
            slowest = stack.workerLogLines(containing: "dedupe rebuilt from status history").compactMap { line -> (ms: Int, run: String)? in
                guard line.at >= since.addingTimeInterval(-1), let ms = line.value("duration.ms").flatMap({ Int($0) }) else { return nil }
                return (ms, line.run)
            }.max { $0.ms < $1.ms }
            if let slowest, slowest.ms >= 1_000 {
                note("slowest dedupe rebuild while the status leaders were away: \(slowest.ms) ms (\(slowest.run))")
                return
            }
            try? await Task.sleep(for: .milliseconds(500))
        } while ContinuousClock.now < deadline
        problem("no dedupe rebuild waited for the status leaders (slowest since: \(slowest.map { "\($0.ms) ms" } ?? "none"))")
    }

    /// The producer fault took effect when the replacement's log says its producer was replaced.
    private func checkProducerReplaced(_ identity: String) async {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if stack.workerLogLines(containing: "kafka producer client hit a fatal error; replaced it").contains(where: { $0.run == identity }) {
                note("\(identity): its producer hit the fatal error and replaced its client")
                return
            }
            try? await Task.sleep(for: .milliseconds(500))
        }
        problem("\(identity)'s log shows no producer replacement: the InitProducerId error went to another client")
    }
}
