import ArgumentParser
import Foundation
import ProcessStack
import Logging
import Locking

/// A bounded soak: a fixed call rate through dispatch → workers → simulator, sampling memory and
/// open fds of every child process, and throughput per interval.
struct Soak: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak", abstract: "Fixed-rate soak; samples RSS and fds of each process; fails when they grow without bound.")

    @OptionGroup var stackOptions: StackOptions
    @Option(help: "Seconds of load.") var seconds = 60
    @Option(help: "Calls per second.") var rate: Double = 20
    @Option(help: "Seconds between samples.") var interval = 5

    func run() async throws {
        let directory = stackOptions.makeDirectory("callpush-soak")
        let logger = stackOptions.logger
        say("callpush-campaign soak: \(seconds) s at \(rate) calls/s, \(stackOptions.workers) workers, logs in \(directory)")
        let stack = try Stack(workers: stackOptions.workers, directory: directory, binDirectory: stackOptions.binDir, logger: logger)
        let collector = try await OutcomeCollector(bootstrap: stack.cluster.bootstrapServers, logger: logger)
        var series: [ProcessSeries] = []
        var throughput: [(from: Int, to: Int, accepted: Int, sent: Int)] = []
        var settled = false
        var snapshot: [CallLoad.Call] = []
        try await withRunningStack(stack, collector: collector, label: "soak") {
            series = stack.currentRuns.map { ProcessSeries(name: $0.name, pid: $0.pid) }
            series.append(ProcessSeries(name: "orchestrator", pid: ProcessInfo.processInfo.processIdentifier))
            let load = CallLoad(stack: stack, ringTimeoutSeconds: 30)
            let loadStart = ContinuousClock.now
            let sentOffset = Int(collector.elapsedSeconds)
            async let ringing: Void = load.ring(count: Int(Double(seconds) * rate), rate: rate)
            var tick = 0
            while tick * interval < seconds {
                tick += 1
                try await Task.sleep(until: loadStart + .seconds(tick * interval))
                let at = Double(tick * interval)
                for index in series.indices {
                    if let sample = ProcessSample.read(pid: series[index].pid) { series[index].samples.append((at, sample)) }
                }
                let from = (tick - 1) * interval
                let accepted = load.snapshot.filter { $0.answer == .accepted && ($0.requestedAt - loadStart).inSeconds >= Double(from) }.count
                throughput.append((from, tick * interval, accepted, collector.sentBetween(sentOffset + from, sentOffset + tick * interval)))
            }
            await ringing
            snapshot = load.snapshot
            let deadline = ContinuousClock.now + .seconds(50)
            while ContinuousClock.now < deadline, !Verdict.allSettled(snapshot, collector) {
                try await Task.sleep(for: .milliseconds(250))
            }
            settled = Verdict.allSettled(snapshot, collector)
        }

        let warmUp = Double(max(10, seconds / 4))
        say("interval   accepted/s  sent/s")
        for row in throughput {
            let span = Double(row.to - row.from)
            say(String(format: "%4d-%-4d %10.1f %8.1f", row.from, row.to, Double(row.accepted) / span, Double(row.sent) / span))
        }
        say("process          rss MiB: start  warm     end      max   fds: start warm  end   max")
        for entry in series { say(entry.line(warmUp: warmUp)) }
        var verdict = Verdict()
        verdict.checkCalls(snapshot, collector: collector)
        var problems = series.filter { $0.name != "orchestrator" }.compactMap { $0.verdict(warmUp: warmUp) }
        if !settled { problems.append("\(verdict.lost.count) accepted deliveries without a terminal status") }
        let crashes = stack.crashes
        problems += crashes
        let steady = throughput.filter { Double($0.from) >= warmUp && $0.to <= seconds }
        let sentRate = steady.isEmpty ? 0 : Double(steady.reduce(0) { $0 + $1.sent }) / Double(steady.reduce(0) { $0 + $1.to - $1.from })
        if sentRate < rate * 0.8 { problems.append(String(format: "steady sent rate %.1f/s < 0.8 × offered %.0f/s", sentRate, rate)) }
        for problem in problems { say("  SOAK PROBLEM: \(problem)") }
        say("soak seconds=\(seconds) rate=\(Int(rate)) accepted=\(verdict.accepted) refused=\(verdict.refused) "
            + "lost=\(verdict.lost.count) " + String(format: "steady_sent_per_s=%.1f", sentRate)
            + " p99_ms=\(Int(verdict.p99Ms.rounded())) crashed=\(crashes.count) result=\(problems.isEmpty ? "pass" : "FAIL")")
        if !problems.isEmpty { throw ExitCode(1) }
    }
}
