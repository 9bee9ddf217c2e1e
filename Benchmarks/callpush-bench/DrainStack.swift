import Foundation
import Kafka
import Locking
import Logging
import ProcessStack

/// The processes of `callpush-bench drain`: the embedded cluster (in this process), the APNs
/// simulator (its own process, shared by every measured worker) and, one at a time, the worker
/// being measured.
final class DrainStack: Sendable {
    /// The names a measured worker's topics get (fresh ones per drain, so no drain sees another's
    /// statuses in its dedupe rebuild).
    struct Topics: Sendable {
        var requests: String
        var status: String
        var deadLetter: String
    }

    let cluster: EmbeddedKafkaCluster
    let files: StackFiles
    let binDir: String
    let directory: String
    let partitions: Int
    let simulatorPort: Int
    let adminPort: Int
    let simulator: ChildProcess
    let logger: Logger
    let http = LocalHTTP()
    private let drains = Locked(0)
    private let pythonLines = Locked<[String]>([])
    private let simulatorStart: (cpu: Double, accepted: Int)

    init(binDir: String, directory: String, partitions: Int, logger: Logger) async throws {
        self.binDir = binDir
        self.directory = directory
        self.partitions = partitions
        self.logger = logger
        files = try StackFiles(directory: directory, keys: 1, app: "bench", bundleID: "com.example.bench")
        cluster = try EmbeddedKafkaCluster(brokers: 3, logger: logger)
        simulatorPort = try freeLocalPort()
        adminPort = try freeLocalPort()
        simulator = try ChildProcess(
            name: "apns-simulator", executable: binDir + "/apns-simulator",
            arguments: ["--host", "127.0.0.1", "--port", "\(simulatorPort)", "--admin-port", "\(adminPort)",
                        "--write-ca", files.caFile, "--log-level", "warning", "--max-recorded", "1000"] + files.tokenKeyArguments,
            environment: [:], logPath: directory + "/apns-simulator.log")
        let simulator = self.simulator
        try await http.waitUntilOK("http://127.0.0.1:\(adminPort)/admin/stats", timeout: .seconds(60)) { simulator.exit == nil }
        simulatorStart = (ProcessSample.cpuSeconds(pid: simulator.pid) ?? 0, await Self.accepted(http, adminPort) ?? 0)
    }

    var pythonOutput: String? { pythonLines.withLock { $0.isEmpty ? nil : $0.joined(separator: "; ") } }

    /// Environment of a push-worker as in production (docs/push-worker.md), pointed at this stack.
    func startWorker(_ executable: String, topics: Topics, httpPort: Int) throws -> ChildProcess {
        let environment = [
            "CALLPUSH_KAFKA_BOOTSTRAP": cluster.bootstrapServers,
            "CALLPUSH_APPS_FILE": files.appsFiles[0],
            "CALLPUSH_ACK_SECRET_FILE": files.ackSecretFile,
            "CALLPUSH_APNS_CA_FILE": files.caFile,
            "CALLPUSH_APNS_SANDBOX_ENDPOINT": "127.0.0.1:\(simulatorPort)",
            "CALLPUSH_APNS_PRODUCTION_ENDPOINT": "127.0.0.1:\(simulatorPort)",
            "CALLPUSH_TOPIC_REQUESTS": topics.requests,
            "CALLPUSH_TOPIC_STATUS": topics.status,
            "CALLPUSH_TOPIC_DLQ": topics.deadLetter,
            "CALLPUSH_GROUP_ID": "drain-" + topics.requests,
            "CALLPUSH_WORKER_ID": "drain-worker",
            "CALLPUSH_HTTP_HOST": "127.0.0.1",
            "CALLPUSH_HTTP_PORT": "\(httpPort)",
            "CALLPUSH_LOG_LEVEL": "warning",
        ]
        return try ChildProcess(name: "push-worker", executable: executable, arguments: [], environment: environment,
                                logPath: directory + "/" + topics.requests + ".log")
    }

    func startPython(_ script: String, topics: Topics, expect: Int) throws -> ChildProcess {
        try ChildProcess(
            name: "python-peer", executable: try which("python3"),
            arguments: [script, "--bootstrap", cluster.bootstrapServers, "--group", "drain-" + topics.requests,
                        "--requests", topics.requests, "--status", topics.status, "--port", "\(simulatorPort)", "--ca", files.caFile,
                        "--key", files.keyFiles[0], "--key-id", StackFiles.keyID(0), "--team-id", StackFiles.teamID,
                        "--bundle", files.bundleID, "--expect", "\(expect)"],
            environment: ["PYTHONUNBUFFERED": "1"], logPath: directory + "/" + topics.requests + ".log")
    }

    /// Writes `backlog` to fresh topics, starts the worker, reads its statuses until every ring has
    /// one, sampling the worker's CPU and RSS, then stops it.
    func drain(_ backlog: ThirdPartyBacklog, label: String, round: Int,
               start: (Topics, Int) throws -> ChildProcess) async throws -> DrainResult {
        let index = drains.withLock { $0 += 1; return $0 }
        let topics = Topics(requests: "drain\(index).requests", status: "drain\(index).status", deadLetter: "drain\(index).dlq")
        try cluster.createTopic(topics.requests, partitions: partitions)
        try cluster.createTopic(topics.status, partitions: partitions)
        try cluster.createTopic(topics.deadLetter, partitions: 1)
        let kafka = KafkaConfiguration(bootstrapServers: [cluster.bootstrapServers], clientID: "drain-bench",
                                       properties: ["fetch.wait.max.ms": "10"])
        let reader = try KafkaConsumer(configuration: KafkaConsumerConfiguration(kafka: kafka, mode: .manual), logger: logger)
        do {
            try await backlog.write(to: topics.requests, partitions: partitions, bootstrap: cluster.bootstrapServers,
                                    directory: directory, consumer: reader)
            try await reader.assign((0..<Int32(partitions)).map { KafkaPartitionAssignment(topic: topics.status, partition: $0, start: .beginning) })
        } catch {
            await reader.shutdown()
            throw error
        }
        let acceptedBefore = await Self.accepted(http, adminPort) ?? 0
        let load = loadAverage()
        let process = try start(topics, try freeLocalPort())
        let peak = Locked(0)
        let sampler = Task {
            while !Task.isCancelled, let sample = ProcessSample.read(pid: process.pid) {
                peak.withLock { $0 = max($0, sample.rssKiB) }
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        var first: (at: ContinuousClock.Instant, count: Int, sample: ProcessSample)?
        var middle: ProcessSample?
        var last: (at: ContinuousClock.Instant, count: Int, sample: ProcessSample)?
        let bound = Duration.seconds(max(120, backlog.events / 200))
        let reading = Task { () -> (first: (ContinuousClock.Instant, Int, ProcessSample)?, middle: ProcessSample?,
                                    last: (ContinuousClock.Instant, Int, ProcessSample)?, pause: Duration) in
            var count = 0
            var first: (ContinuousClock.Instant, Int, ProcessSample)?
            var middle: ProcessSample?
            // The longest time between two statuses read: a drain that stalls shows it here.
            var previous: ContinuousClock.Instant?
            var pause = Duration.zero
            for try await _ in reader.messages {
                count += 1
                let now = ContinuousClock.now
                if let previous { pause = max(pause, now - previous) }
                previous = now
                if first == nil, let sample = ProcessSample.read(pid: process.pid) { first = (now, count, sample) }
                if count == backlog.events / 2 { middle = ProcessSample.read(pid: process.pid) }
                if count >= backlog.events {
                    return (first, middle, ProcessSample.read(pid: process.pid).map { (.now, count, $0) }, pause)
                }
            }
            return (first, middle, nil, pause)
        }
        let timer = Task {
            try await Task.sleep(for: bound)
            reading.cancel()
        }
        let outcome = await reading.result
        timer.cancel()
        sampler.cancel()
        var pause = Duration.zero
        if case .success(let values) = outcome {
            first = values.first.map { (at: $0.0, count: $0.1, sample: $0.2) }
            middle = values.middle
            last = values.last.map { (at: $0.0, count: $0.1, sample: $0.2) }
            pause = values.pause
        }
        let exit = await process.stop(timeout: .seconds(30))
        await reader.shutdown()
        if process.name == "python-peer", let log = try? String(contentsOfFile: process.logPath, encoding: .utf8),
           let line = log.split(separator: "\n").last(where: { $0.hasPrefix("{") }) {
            pythonLines.withLock { $0.append(String(line)) }
        }
        guard let first, let last else {
            throw StackError("\(label) did not write \(backlog.events) statuses within \(bound) (exit: \(exit.map { "\($0)" } ?? "none"); "
                             + "log \(process.logPath))")
        }
        let accepted = await Self.accepted(http, adminPort) ?? 0
        return DrainResult(
            label: label, round: round, rings: last.count - first.count, seconds: (last.at - first.at).inSeconds,
            cpuSeconds: last.sample.cpuSeconds - first.sample.cpuSeconds, rssFirstKiB: first.sample.rssKiB,
            rssMiddleKiB: middle?.rssKiB ?? 0, rssLastKiB: last.sample.rssKiB, rssPeakKiB: peak.withLock { $0 },
            pushes: accepted - acceptedBefore, longestPauseMilliseconds: pause.inSeconds * 1000, load: load)
    }

    func simulatorStats() async -> String {
        guard let response = try? await http.send("GET", "http://127.0.0.1:\(adminPort)/admin/stats"), response.status == 200 else {
            return "no answer"
        }
        return String(decoding: response.body, as: UTF8.self)
    }

    func simulatorCPUPerPush() async -> String {
        let cpu = (ProcessSample.cpuSeconds(pid: simulator.pid) ?? 0) - simulatorStart.cpu
        let pushes = (await Self.accepted(http, adminPort) ?? 0) - simulatorStart.accepted
        return String(format: "%.1f µs of CPU per push (%d pushes)", cpu / Double(max(pushes, 1)) * 1e6, pushes)
    }

    static func accepted(_ http: LocalHTTP, _ adminPort: Int) async -> Int? {
        guard let response = try? await http.send("GET", "http://127.0.0.1:\(adminPort)/admin/stats"), response.status == 200,
              let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] else { return nil }
        return object["accepted"] as? Int
    }

    func stop() async {
        await simulator.stop(timeout: .seconds(10))
        await cluster.shutdown()
    }
}
