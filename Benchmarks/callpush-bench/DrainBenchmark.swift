import ArgumentParser
import Foundation
import Kafka
import Logging
import ProcessStack

/// `callpush-bench drain`: what a push-worker costs the machine it runs on, per ring, measured from
/// outside on its own process, against the reference Python worker in the same run.
///
/// The embedded cluster runs in this process; the APNs simulator, each push-worker and the Python
/// peer run as their own processes. Each measured worker gets a fresh topic pair holding the same
/// backlog of third-party-formatted ring events (`ThirdPartyBacklog`, written by `kcat`) and drains
/// it into the same simulator; this process reads the worker's status topic and samples the
/// worker's `/proc/PID/stat` and RSS as the statuses arrive.
///
/// With `--rate`, measures ring latency at a fixed offered load through dispatch instead
/// (`RateLatency`).
struct DrainBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "drain",
        abstract: "A release push-worker process draining a backlog of third-party-formatted rings: rings/s, its CPU per ring and RSS, vs the Python peer.")

    @Option(help: "Ring events in each backlog.") var events = 30_000
    @Option(help: "Partitions of the requests and status topics (0: enough for the embedded cluster's ~5 MB per partition, at least 24).")
    var partitions = 0
    @Option(help: "push-worker executable to measure; repeat to compare builds in one run (default: push-worker in --bin-dir).")
    var worker: [String] = []
    @Option(help: "Rounds; each round drains a fresh backlog with every worker, then with the Python peer.") var rounds = 1
    @Option(help: "The reference Python worker.") var python = "Benchmarks/peers/python_push_worker.py"
    @Flag(name: .customLong("without-python"), help: "Do not run the Python peer.") var withoutPython = false
    @Option(help: "Directory holding the release apns-simulator, push-worker and callpush (default: this program's).")
    var binDir: String?
    @Option(help: "Working directory for keys, backlogs and process logs (default: a new temporary one).") var workDir: String?
    @Option(parsing: .upToNextOption,
            help: "Instead of a drain: ring latency at these offered loads (calls/s) through dispatch, POST → push at the simulator, against `callpush dev`.")
    var rate: [Int] = []
    @Option(help: "Seconds of load per --rate.") var seconds = 10
    @Option(help: "Partitions of `callpush dev` for --rate.") var devPartitions = 6
    @Option(help: "push-workers of `callpush dev` for --rate.") var devWorkers = 2

    var resolvedBinDir: String {
        binDir ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
    }

    func run() async throws {
        let directory = workDir ?? NSTemporaryDirectory() + "callpush-drain-\(ProcessInfo.processInfo.processIdentifier)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if !rate.isEmpty {
            try await RateLatency(binDir: resolvedBinDir, directory: directory, partitions: devPartitions, workers: devWorkers)
                .run(rates: rate, seconds: seconds)
            removeTemporary(directory)
            return
        }
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let workers = worker.isEmpty ? [resolvedBinDir + "/push-worker"] : worker
        // A ring event of the backlog is ~560 bytes; the mock cluster keeps ~5 MB per partition.
        let partitionCount = partitions > 0 ? partitions : max(24, (events * 560) / 3_500_000 + 1)
        let stack = try await DrainStack(binDir: resolvedBinDir, directory: directory, partitions: partitionCount, logger: logger)
        var failure: (any Error)?
        do {
            let backlog = try ThirdPartyBacklog(app: stack.files.app, events: events, ringDeadline: Date().addingTimeInterval(3 * 3600),
                                                directory: directory)
            print("callpush-bench drain: \(events) third-party-formatted ring events (largest \(backlog.largestEvent) B), "
                  + "\(partitionCount) partitions, \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(loadAverage())")
            print(DrainResult.header)
            let labels = workers.indices.map { workers.count == 1 ? "push-worker" : "push-worker #\($0 + 1)" }
            var byWorker: [[DrainResult]] = workers.map { _ in [] }
            var peers: [DrainResult] = []
            for round in 1...rounds {
                var swift: [DrainResult] = []
                for (index, executable) in workers.enumerated() {
                    let result = try await stack.drain(backlog, label: labels[index], round: round) { topics, statusPort in
                        try stack.startWorker(executable, topics: topics, httpPort: statusPort)
                    }
                    print(result.line)
                    swift.append(result)
                    byWorker[index].append(result)
                }
                if !withoutPython {
                    let peer = try await stack.drain(backlog, label: "python peer", round: round) { topics, _ in
                        try stack.startPython(python, topics: topics, expect: events)
                    }
                    print(peer.line)
                    peers.append(peer)
                    for (index, result) in swift.enumerated() {
                        print(String(format: "  round %d, %@: CPU per ring python peer / push-worker = %.1f (target ≥ 10); "
                                     + "rings/s push-worker / python peer = %.1f",
                                     round, workers.count == 1 ? "push-worker" : "push-worker #\(index + 1)",
                                     peer.cpuPerRingMicros / result.cpuPerRingMicros, result.ringsPerSecond / peer.ringsPerSecond))
                    }
                }
            }
            for (index, results) in byWorker.enumerated() {
                print(DrainResult.summary(of: results, label: labels[index], peers: peers))
            }
            let simulator = await stack.simulatorStats()
            let simulatorCPU = await stack.simulatorCPUPerPush()
            print("simulator (its own process): \(simulatorCPU); \(simulator)")
            if let pythonLog = stack.pythonOutput { print("python peer said: \(pythonLog)") }
        } catch {
            failure = error
        }
        await stack.stop()
        if let failure {
            print("drain: \(failure) (logs in \(directory))")
            throw ExitCode(2)
        }
        removeTemporary(directory)
    }

    /// The default working directory (backlogs of up to hundreds of MB, keys, logs) goes once a run
    /// succeeded; one given with `--work-dir`, or a failed run's (its logs are named), stays.
    private func removeTemporary(_ directory: String) {
        guard workDir == nil else { return }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`): the machine is shared, so every
/// figure is printed with the load it was measured under.
func loadAverage() -> String {
    let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

/// One measured drain.
struct DrainResult {
    var label: String
    var round: Int
    /// Statuses read between the first and the last (the measured window).
    var rings: Int
    var seconds: Double
    var cpuSeconds: Double
    var rssFirstKiB: Int
    var rssMiddleKiB: Int
    var rssLastKiB: Int
    var rssPeakKiB: Int
    var pushes: Int
    /// The longest time between two consecutive statuses read.
    var longestPauseMilliseconds: Double
    var load: String

    var ringsPerSecond: Double { Double(rings) / max(seconds, 1e-9) }
    var cpuPerRingMicros: Double { cpuSeconds / Double(max(rings, 1)) * 1e6 }

    static let header = "round  worker           rings/s   CPU µs/ring   RSS MiB: first  middle    last    peak   pushes  pause ms  load"
    var line: String {
        func mib(_ kib: Int) -> String { String(format: "%7.1f", Double(kib) / 1024) }
        return String(format: "%5d  ", round) + label.padding(toLength: 15, withPad: " ", startingAt: 0)
            + String(format: " %8.0f %13.1f       ", ringsPerSecond, cpuPerRingMicros)
            + "\(mib(rssFirstKiB)) \(mib(rssMiddleKiB)) \(mib(rssLastKiB)) \(mib(rssPeakKiB))"
            + String(format: " %8d  %8.0f", pushes, longestPauseMilliseconds) + "  " + load
    }

    /// One worker's rounds in a line: the median and range of its CPU per ring and rings/s, and, with
    /// the peer's rounds (the same rounds, in order), the median and range of the peer / worker CPU
    /// ratio and in how many rounds it reached the 10.
    static func summary(of results: [DrainResult], label: String, peers: [DrainResult]) -> String {
        let cpu = results.map(\.cpuPerRingMicros)
        let rate = results.map(\.ringsPerSecond)
        guard let cpuLow = cpu.min(), let cpuHigh = cpu.max(), let rateLow = rate.min(), let rateHigh = rate.max() else {
            return "summary, \(label): no rounds"
        }
        var text = String(format: "summary, %@ (%d rounds): CPU µs per ring median %.1f (%.1f–%.1f); rings/s median %.0f (%.0f–%.0f)",
                          label, results.count, cpu.median, cpuLow, cpuHigh, rate.median, rateLow, rateHigh)
        let ratios = zip(results, peers).map { $1.cpuPerRingMicros / $0.cpuPerRingMicros }
        if let ratioLow = ratios.min(), let ratioHigh = ratios.max() {
            text += String(format: "; python peer / push-worker CPU per ring median %.1f (%.1f–%.1f), ≥ 10 in %d of %d rounds",
                           ratios.median, ratioLow, ratioHigh, ratios.filter { $0 >= 10 }.count, ratios.count)
        }
        return text
    }
}
