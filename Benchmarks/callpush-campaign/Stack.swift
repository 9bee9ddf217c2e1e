import CallContract
import FCMSimulator
import Foundation
import ProcessStack
import Kafka
import Logging
import Locking

/// The system under test: the embedded Kafka cluster (in this process, so faults can be injected
/// through its API) and, as child processes, the APNs simulator, the FCM simulator, dispatch and the
/// push-workers.
///
/// Every worker run has its own APNs token key and its own FCM service account (all registered with
/// the simulators): the key id of a recorded push's JWT, or the service account of a recorded FCM
/// message, tells which run sent it.
final class Stack: Sendable {
    static let partitions = 6
    /// The app of every call (the apps files name it).
    static let app = "campaign"

    let cluster: EmbeddedKafkaCluster
    let files: StackFiles
    let binDirectory: String
    let simulatorPort: Int
    let adminPort: Int
    let fcmPort: Int
    let fcmAdminPort: Int
    let dispatchPort: Int
    let workerPorts: [Int]
    let http = LocalHTTP()
    let started = ContinuousClock.now
    /// Seconds since the stack was created (for log lines).
    var elapsed: Double { (ContinuousClock.now - started).inSeconds }
    /// Every run of every child, by name (a restarted worker has two runs).
    private let runs = Locked<[String: [ChildProcess]]>([:])
    /// The next unused token key (one per worker run; see ``StackFiles``).
    private let nextKey = Locked(0)
    /// Runs started per worker slot (each run gets its own identity).
    private let workerRuns = Locked<[Int: Int]>([:])
    /// Extra environment of the workers of a slot (e.g. a small dedupe capacity).
    let workerEnvironment: [Int: [String: String]]
    /// Group session timeout of the workers (`CALLPUSH_KAFKA_SESSION_TIMEOUT_MS`). The embedded
    /// cluster's coordinator ends every rebalance only after this minus 1 s (docs/kafka.md), so a
    /// rolling restart stalls each step for about that long.
    static let sessionTimeoutMs = 3_000

    var adminURL: String { "http://127.0.0.1:\(adminPort)/admin" }
    var fcmAdminURL: String { "http://127.0.0.1:\(fcmAdminPort)/admin" }
    /// Where the FCM simulator writes its CA (`--write-ca`); the workers trust it for FCM.
    var fcmCAFile: String { files.directory + "/fcm-ca.pem" }
    var dispatchURL: String { "http://127.0.0.1:\(dispatchPort)" }
    static func workerName(_ index: Int) -> String { "push-worker-\(index + 1)" }
    /// The broker the campaign makes leader of `partition` of the requests and status topics.
    static func pinnedLeader(_ partition: Int32) -> Int32 { partition % 3 + 1 }

    init(workers: Int, directory: String, binDirectory: String, logger: Logger,
         workerEnvironment: [Int: [String: String]] = [:], tokenKeys: Int = 0) throws {
        self.binDirectory = binDirectory
        self.workerEnvironment = workerEnvironment
        files = try StackFiles(directory: directory, keys: max(tokenKeys, workers + 16), app: Self.app,
                               bundleID: "com.example.campaign", fcm: true)
        cluster = try EmbeddedKafkaCluster(brokers: 3, logger: logger)  // pinnedLeader assumes 3
        try cluster.createTopic(Topics.requests, partitions: Self.partitions)
        try cluster.createTopic(Topics.status, partitions: Self.partitions)
        try cluster.createTopic(Topics.deadLetter, partitions: 1)
        // The mock cluster places leaders at random; pinned, a fault can move one and move it back.
        for topic in [Topics.requests, Topics.status] {
            for partition in 0..<Int32(Self.partitions) {
                try cluster.setPartitionLeader(topic: topic, partition: partition, broker: Self.pinnedLeader(partition))
            }
        }
        simulatorPort = try freeLocalPort()
        adminPort = try freeLocalPort()
        fcmPort = try freeLocalPort()
        fcmAdminPort = try freeLocalPort()
        try Self.writeServiceAccounts(files.fcmServiceAccountFiles, tokenURI: "https://127.0.0.1:\(fcmPort)/token")
        dispatchPort = try freeLocalPort()
        workerPorts = try (0..<workers).map { _ in try freeLocalPort() }
    }

    /// Kafka client properties every process gets: short fetch waits (the mock broker holds an
    /// empty fetch for `fetch.wait.max.ms` and does not wake on new data), quick metadata refresh
    /// and a short session so a killed worker's partitions move within seconds.
    private var kafkaEnvironment: [String: String] {
        ["CALLPUSH_KAFKA_BOOTSTRAP": cluster.bootstrapServers,
         "CALLPUSH_KAFKA_FETCH_WAIT_MAX_MS": "10",
         "CALLPUSH_KAFKA_TOPIC_METADATA_REFRESH_INTERVAL_MS": "1000",
         "CALLPUSH_APPS_FILE": files.appsFiles[0],
         "CALLPUSH_ACK_SECRET_FILE": files.ackSecretFile,
         "CALLPUSH_LOG_LEVEL": "warning"]
    }

    /// Project of the campaign's FCM service accounts.
    static let fcmProject = "callpush-campaign"
    /// `client_email` of service account `index` (the worker run that uses it).
    static func fcmAccount(_ index: Int) -> String { "campaign-\(index)@\(fcmProject).iam.gserviceaccount.com" }

    /// Generates one service account per apps file (RSA keys, two at a time: 2048-bit key
    /// generation is the slow part) and writes its JSON, `token_uri` pointing at the FCM simulator.
    private static func writeServiceAccounts(_ paths: [String], tokenURI: String) throws {
        let accounts = Locked<[Int: String]>([:])
        let failure = Locked<(any Error)?>(nil)
        DispatchQueue.concurrentPerform(iterations: paths.count) { index in
            do {
                var account = try FCMSimulatorServiceAccount.generate(projectID: fcmProject)
                account.clientEmail = fcmAccount(index)
                let json = try account.json(tokenURI: tokenURI)
                accounts.withLock { $0[index] = json }
            } catch {
                failure.withLock { $0 = error }
            }
        }
        if let error = failure.withLock({ $0 }) { throw StackError("cannot generate an FCM service account: \(error)") }
        for (index, path) in paths.enumerated() {
            try StackFiles.writeSecret(accounts.withLock { $0[index] ?? "" }, to: path)
        }
    }

    /// Starts the simulators, dispatch and every worker, and waits until all are ready.
    func start() async throws {
        try await startSimulator()
        try await startFCMSimulator()
        try await startDispatch()
        for index in workerPorts.indices { try startWorker(index) }
        for index in workerPorts.indices { try await waitForWorker(index) }
    }

    func startSimulator() async throws {
        let process = try launch("apns-simulator", program: "apns-simulator", arguments: [
            "--host", "127.0.0.1", "--port", "\(simulatorPort)", "--admin-port", "\(adminPort)",
            "--write-ca", files.caFile, "--log-level", "warning", "--max-recorded", "1000000",
        ] + files.tokenKeyArguments, environment: [:])
        try await http.waitUntilOK("\(adminURL)/stats", timeout: .seconds(60)) { process.exit == nil }
    }

    /// The FCM simulator, accepting the grants of every worker run's service account.
    func startFCMSimulator() async throws {
        let process = try launch("fcm-simulator", program: "fcm-simulator", arguments: [
            "--host", "127.0.0.1", "--port", "\(fcmPort)", "--admin-port", "\(fcmAdminPort)",
            "--write-ca", fcmCAFile, "--log-level", "warning", "--max-recorded", "1000000",
        ] + files.fcmServiceAccountFiles.flatMap { ["--service-account", $0] }, environment: [:])
        try await http.waitUntilOK("\(fcmAdminURL)/stats", timeout: .seconds(60)) { process.exit == nil }
    }

    func startDispatch() async throws {
        var environment = kafkaEnvironment
        environment["CALLPUSH_DISPATCH_API_KEYS_FILE"] = files.apiKeysFile
        environment["CALLPUSH_DISPATCH_HOST"] = "127.0.0.1"
        environment["CALLPUSH_DISPATCH_PORT"] = "\(dispatchPort)"
        environment["CALLPUSH_DISPATCH_ID"] = "dispatch-1"
        environment["CALLPUSH_DISPATCH_METRICS_PORT"] = "-1"  // the campaign reads no dispatch metrics; no fixed port to collide
        environment["CALLPUSH_DISPATCH_PUBLISH_TIMEOUT_MS"] = "3000"
        // Notice: an acknowledgement without an offset is logged (read for a lost call). For a closer
        // look: CAMPAIGN_DISPATCH_LOG_LEVEL=debug and CAMPAIGN_DISPATCH_KAFKA_DEBUG=eos,msg (librdkafka).
        environment["CALLPUSH_LOG_LEVEL"] = ProcessInfo.processInfo.environment["CAMPAIGN_DISPATCH_LOG_LEVEL"] ?? "notice"
        if let debug = ProcessInfo.processInfo.environment["CAMPAIGN_DISPATCH_KAFKA_DEBUG"] { environment["CALLPUSH_KAFKA_DEBUG"] = debug }
        let process = try launch("dispatch", program: "dispatch", arguments: [], environment: environment)
        try await http.waitUntilOK("\(dispatchURL)/readyz", timeout: .seconds(60)) { process.exit == nil }
    }

    /// Starts a new run of worker slot `index` (again, after a kill or a stop) with a new identity
    /// (`CALLPUSH_WORKER_ID` push-worker-N, then push-worker-N-run2, …, as a replaced pod gets a new
    /// name), its own token key and its own log file. Does not wait for its readiness.
    @discardableResult
    func startWorker(_ index: Int) throws -> String {
        let run = workerRuns.withLock { runs -> Int in
            runs[index, default: 0] += 1
            return runs[index]!
        }
        let identity = Self.workerName(index) + (run == 1 ? "" : "-run\(run)")
        var environment = kafkaEnvironment
        environment["CALLPUSH_KAFKA_SESSION_TIMEOUT_MS"] = "\(Self.sessionTimeoutMs)"
        environment["CALLPUSH_KAFKA_HEARTBEAT_INTERVAL_MS"] = "500"
        environment["CALLPUSH_APNS_CA_FILE"] = files.caFile
        environment["CALLPUSH_APNS_SANDBOX_ENDPOINT"] = "127.0.0.1:\(simulatorPort)"
        environment["CALLPUSH_APNS_PRODUCTION_ENDPOINT"] = "127.0.0.1:\(simulatorPort)"
        environment["CALLPUSH_APNS_TIMEOUT_MS"] = "2000"
        environment["CALLPUSH_FCM_ENDPOINT"] = "https://127.0.0.1:\(fcmPort)"
        environment["CALLPUSH_FCM_CA_FILE"] = fcmCAFile
        environment["CALLPUSH_FCM_CONNECTIONS"] = "2"
        environment["CALLPUSH_HTTP_HOST"] = "127.0.0.1"
        environment["CALLPUSH_HTTP_PORT"] = "\(workerPorts[index])"
        environment["CALLPUSH_WORKER_ID"] = identity
        // Assignments, revokes, drains and dedupe rebuilds, with times: what a lost delivery is traced with.
        environment["CALLPUSH_LOG_LEVEL"] = "info"
        let key = nextKey.withLock { next -> Int in
            defer { next += 1 }
            return next
        }
        guard key < files.appsFiles.count else { throw StackError("no unused token key left for another worker run") }
        environment["CALLPUSH_APPS_FILE"] = files.appsFiles[key]
        environment.merge(workerEnvironment[index] ?? [:]) { _, slot in slot }
        _ = try launch(Self.workerName(index), program: "push-worker", arguments: [], environment: environment, logName: identity)
        return identity
    }

    /// Waits until worker `index` owns partitions (`/readyz` 200).
    func waitForWorker(_ index: Int, timeout: Duration = .seconds(60)) async throws {
        let name = Self.workerName(index)
        try await http.waitUntilOK("http://127.0.0.1:\(workerPorts[index])/readyz", timeout: timeout) {
            current(name)?.exit == nil
        }
    }

    /// A counter or gauge of worker `index`'s `/metrics` (summed over its label sets), `nil` when
    /// the worker does not answer.
    func workerMetric(_ index: Int, _ metric: String) async -> Double? {
        guard let response = try? await http.send("GET", "http://127.0.0.1:\(workerPorts[index])/metrics", timeout: 5),
              response.status == 200 else { return nil }
        var total = 0.0
        for line in String(decoding: response.body, as: UTF8.self).split(separator: "\n")
        where line.hasPrefix(metric) && (line.dropFirst(metric.count).first == " " || line.dropFirst(metric.count).first == "{") {
            total += line.split(separator: " ").last.flatMap { Double($0) } ?? 0
        }
        return total
    }

    /// One line of a worker run's log.
    struct WorkerLogLine {
        /// The line's timestamp (the logger writes whole seconds).
        var at: Date
        /// The run's identity (its log file's name).
        var run: String
        var text: Substring

        /// The value of `key=` in the line (up to the next space).
        func value(_ key: String) -> Substring? {
            guard let range = text.range(of: key + "=") else { return nil }
            return text[range.upperBound...].prefix { $0 != " " }
        }
    }

    /// The lines of every worker run's log that contain `marker`.
    func workerLogLines(containing marker: String) -> [WorkerLogLine] {
        let logTime = DateFormatter()
        logTime.dateFormat = "yyyy-MM-dd'T'HH:mm:ssZ"
        logTime.locale = Locale(identifier: "en_US_POSIX")
        let directory = files.directory
        let logs = (try? FileManager.default.contentsOfDirectory(atPath: directory))?.filter { $0.hasPrefix("push-worker") && $0.hasSuffix(".log") } ?? []
        return logs.flatMap { name -> [WorkerLogLine] in
            let text = String(decoding: FileManager.default.contents(atPath: "\(directory)/\(name)") ?? Data(), as: UTF8.self)
            return text.split(separator: "\n").compactMap { line in
                guard line.contains(marker), let at = line.split(separator: " ").first.flatMap({ logTime.date(from: String($0)) }) else { return nil }
                return WorkerLogLine(at: at, run: String(name.dropLast(4)), text: line)
            }
        }
    }

    /// The latest run of `name`.
    func current(_ name: String) -> ChildProcess? { runs.withLock { $0[name]?.last } }
    /// Every run of every child.
    var allRuns: [ChildProcess] { runs.withLock { $0.values.flatMap { $0 } }.sorted { $0.name < $1.name } }
    /// The latest runs (one per child name).
    var currentRuns: [ChildProcess] { runs.withLock { $0.values.compactMap(\.last) }.sorted { $0.name < $1.name } }

    private func launch(_ name: String, program: String, arguments: [String], environment: [String: String],
                        logName: String? = nil) throws -> ChildProcess {
        let process = try ChildProcess(name: name, executable: "\(binDirectory)/\(program)", arguments: arguments,
                                       environment: environment, logPath: "\(files.directory)/\(logName ?? name).log")
        runs.withLock { $0[name, default: []].append(process) }
        return process
    }

    /// Stops the children (workers first, so they can still write statuses), then the cluster.
    func stop() async {
        for run in currentRuns where run.name.hasPrefix("push-worker") { await run.stop(timeout: .seconds(15)) }
        for run in currentRuns where !run.name.hasPrefix("push-worker") { await run.stop(timeout: .seconds(15)) }
        await cluster.shutdown()
    }

    /// Children that ended without the campaign asking: crashes. A SIGTERM stop must exit 0.
    var crashes: [String] {
        allRuns.compactMap { run in
            switch (run.intent, run.exit) {
            case (.killed, _): return nil
            case (.stopped, .status(0)?): return nil
            case (.stopped, let exit?): return "\(run.name) (pid \(run.pid)) ended with \(exit) after SIGTERM"
            case (.stopped, nil): return "\(run.name) (pid \(run.pid)) did not exit after SIGTERM + SIGKILL"
            case (.none, let exit?): return "\(run.name) (pid \(run.pid)) crashed: \(exit)"
            case (.none, nil): return nil
            }
        }
    }
}
