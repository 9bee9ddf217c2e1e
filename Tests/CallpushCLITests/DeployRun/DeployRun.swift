import CallpushTestSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Kafka
import Logging
import Locking

/// What a deploy run shares between its compose and Kubernetes forms: the deploy files (the
/// shipped ones or a mutated copy), a scratch directory, loopback addresses, the embedded Kafka
/// cluster in Kafka's place, the containers it started, and the checks every run makes.
///
/// The mapping from the files to this machine is deliberately small (docs/operations.md,
/// "Verified how"):
/// 1. every container gets a loopback address of its own; host names resolve to those through the
///    container's /etc/hosts; a wildcard listen address (`0.0.0.0`, the programs' default) becomes
///    the container's address, so ports stay exactly as written;
/// 2. `CALLPUSH_KAFKA_BOOTSTRAP` names the embedded cluster, which speaks neither TLS nor SASL:
///    `CALLPUSH_KAFKA_SECURITY_PROTOCOL` becomes `PLAINTEXT` (other Kafka settings stay);
/// 3. topics: the embedded cluster has no CreateTopics, so the run creates what the command's
///    `--dry-run` (or the KafkaTopic resources) say, then runs the command as written;
/// 4. placeholders in secrets are generated as their comments say.
final class DeployRun: @unchecked Sendable {
    let deploy: URL
    let directory: URL
    let products: URL
    let dockerfile: DockerfileFacts
    let logger: Logger
    /// 127.A.B.0/24, this run's own.
    private let network: String
    private var nextHost = 2
    private(set) var cluster: EmbeddedKafkaCluster?
    private(set) var running: [(spec: ContainerSpec, process: ServerProcess, grace: Duration)] = []
    /// What the run did, one line a step (for the test's output and the docs).
    private(set) var steps: [String] = []

    init(deploy: URL, products: URL = ChildProcess.productsDirectory) throws {
        self.deploy = deploy
        self.products = products
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("deploy-run-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Traversable by the containers' users, as a volume's parent is.
        chmod(directory.path, 0o755)
        dockerfile = try DockerfileFacts(path: deploy.appendingPathComponent("docker/Dockerfile"))
        network = "127.\(Int.random(in: 16...250)).\(Int.random(in: 0...255))"
        var logger = Logger(label: "deploy-run")
        logger.logLevel = .warning
        self.logger = logger
    }

    func note(_ line: String) { steps.append(line) }

    /// A loopback address no other container of this run has.
    func newAddress() -> String {
        defer { nextHost += 1 }
        return "\(network).\(nextHost)"
    }

    /// deploy/tools/check_deploy.py on these files: the references between the files and the
    /// programs' sources (environment variables, ports, images, metrics) hold.
    func checkReferences() async throws {
        let python = try DeployDocuments.requirePython()
        let script = ChildProcess.repositoryRoot.appendingPathComponent("deploy/tools/check_deploy.py").path
        let result = try await ChildProcess.run(python, [script, "--root", ChildProcess.repositoryRoot.path, "--deploy", deploy.path],
                                                environment: ProcessInfo.processInfo.environment, timeout: .seconds(60))
        guard result.status == 0 else {
            throw DeployRunFailure("check_deploy.py: " + result.stdout.split(separator: "\n").filter { $0.hasPrefix("problem:") }.joined(separator: "\n") + result.stderr)
        }
        note("check_deploy.py: references hold")
    }

    func startCluster(brokers: Int) throws -> EmbeddedKafkaCluster {
        let cluster = try EmbeddedKafkaCluster(brokers: brokers, logger: logger)
        self.cluster = cluster
        note("embedded Kafka cluster (\(brokers) broker\(brokers == 1 ? "" : "s")) in Kafka's place at \(cluster.bootstrapServers)")
        return cluster
    }

    /// Rewrites a container's Kafka settings for the embedded cluster (mapping 2).
    func pointAtEmbeddedKafka(_ spec: inout ContainerSpec) throws {
        guard let cluster, spec.value("CALLPUSH_KAFKA_BOOTSTRAP") != nil else { return }
        spec.set("CALLPUSH_KAFKA_BOOTSTRAP", cluster.bootstrapServers)
        if let protocolName = spec.value("CALLPUSH_KAFKA_SECURITY_PROTOCOL"), protocolName.uppercased() != "PLAINTEXT" {
            spec.set("CALLPUSH_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT")
        }
    }

    /// A wildcard listen address of the container's program becomes the container's own address
    /// (mapping 1): the programs' listen settings, as docs/dispatch.md, docs/push-worker.md and
    /// `apns-simulator --help` name them.
    func bindToOwnAddress(_ spec: inout ContainerSpec) {
        let wildcard = "0.0.0.0"
        switch spec.target {
        case "dispatch":
            for key in ["CALLPUSH_DISPATCH_HOST", "CALLPUSH_DISPATCH_METRICS_HOST"] where (spec.value(key) ?? wildcard) == wildcard {
                spec.set(key, spec.address)
            }
        case "push-worker":
            if (spec.value("CALLPUSH_HTTP_HOST") ?? wildcard) == wildcard { spec.set("CALLPUSH_HTTP_HOST", spec.address) }
        case "apns-simulator":
            if let index = spec.argv.firstIndex(of: "--host"), index + 1 < spec.argv.count, spec.argv[index + 1] == wildcard {
                spec.argv[index + 1] = spec.address
            }
        default: break
        }
    }

    /// Runs a one-shot container to its end.
    func runToCompletion(_ spec: ContainerSpec, bound: Duration = .seconds(90)) async throws -> (status: Int32, stdout: String, stderr: String) {
        let process = try await ContainerRuntime.start(spec, dockerfile: dockerfile, directory: directory, products: products)
        guard let status = await process.exitStatus(within: bound) else {
            throw DeployRunFailure("\(spec.name) did not finish within \(bound): \(process.stderrTail())")
        }
        return (status, process.stdout, process.stderr)
    }

    /// Starts a long-running container; `grace` is how long the file lets it stop after SIGTERM.
    func start(_ spec: ContainerSpec, grace: Duration) async throws {
        let process = try await ContainerRuntime.start(spec, dockerfile: dockerfile, directory: directory, products: products)
        running.append((spec, process, grace))
    }

    /// Fails when a started container has exited.
    func checkAlive() throws {
        for (spec, process, _) in running where !process.isRunning {
            throw DeployRunFailure("\(spec.name) exited at start: \(process.stderrTail(lines: 6))\(process.stdout.split(separator: "\n").suffix(4).joined(separator: "\n"))")
        }
    }

    /// Checks `condition` every 250 ms up to `bound`; whether it held.
    func wait(upTo bound: Duration, until condition: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + bound
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(250))
        }
        return false
    }

    /// GETs `url` until it answers 200 (every 250 ms, up to `bound`), failing early when a container
    /// exits; the last answer goes into the failure.
    func waitForOK(_ url: String, what: String, bound: Duration = .seconds(90)) async throws {
        let deadline = ContinuousClock.now + bound
        var last = "no answer"
        while ContinuousClock.now < deadline {
            try checkAlive()
            if let answer = await Self.get(url) {
                if answer.status == 200 { return }
                last = "HTTP \(answer.status) \(answer.body.prefix(200))"
                // Not "not ready yet" (503) but a path the program does not serve: it never turns 200.
                if answer.status == 404 { break }
            }
            try await Task.sleep(for: .milliseconds(250))
        }
        throw DeployRunFailure("\(what): GET \(url) did not answer 200 (last: \(last))")
    }

    /// One GET (or another method with `body`) with a short bound; nil when nothing answers.
    static func get(_ url: String, method: String = "GET", body: String? = nil, timeout: TimeInterval = 3) async -> (status: Int, body: String)? {
        guard let url = URL(string: url) else { return nil }
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = method
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.connectionProxyDictionary = [:]
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        guard let (data, response) = try? await session.data(for: request), let http = response as? HTTPURLResponse else { return nil }
        return (http.statusCode, String(decoding: data, as: UTF8.self))
    }

    /// A topic as `callpush topics create --dry-run` says it would create it.
    struct PlannedTopic: Equatable, CustomStringConvertible {
        var name: String
        var partitions: Int
        var replication: Int
        var configs: [String: String]
        var description: String {
            "\(name) partitions=\(partitions) replication=\(replication) configs=" + configs.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
        }
    }

    /// `callpush topics create` as the files give it (mapping 3): its `--dry-run` against the empty
    /// cluster lists the topics it would create; `create` puts topics into the embedded cluster
    /// through its own API (it has no CreateTopics); then the command as written must find all
    /// three as asked, without a warning.
    func createTopics(_ job: ContainerSpec, create: ([PlannedTopic]) throws -> Void) async throws -> [PlannedTopic] {
        var dryRun = job
        dryRun.name += "-dry-run"
        dryRun.argv.append("--dry-run")
        let planned = try await runToCompletion(dryRun)
        guard planned.status == 0 else { throw DeployRunFailure("\(job.argv.joined(separator: " ")) --dry-run failed (\(planned.status)): \(planned.stderr)") }
        let topics = planned.stdout.split(separator: "\n").filter { $0.hasPrefix("would create") }.map { line -> PlannedTopic in
            let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            func field(_ key: String) -> String { words.first { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) } ?? "" }
            var configs: [String: String] = [:]
            for pair in field("configs").split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2 { configs[parts[0]] = parts[1] }
            }
            return PlannedTopic(name: words[2], partitions: Int(field("partitions")) ?? 0, replication: Int(field("replication")) ?? 0, configs: configs)
        }
        guard topics.count == 3 else { throw DeployRunFailure("\(job.name): --dry-run planned \(topics.count) topics, not 3: \(planned.stdout)") }
        try create(topics)
        let result = try await runToCompletion(job)
        let exists = result.stdout.split(separator: "\n").filter { $0.hasPrefix("exists") }
        guard result.status == 0, exists.count == 3, result.stderr.isEmpty else {
            throw DeployRunFailure("\(job.argv.joined(separator: " ")) against the topics it planned: status \(result.status), \(result.stdout) \(result.stderr)")
        }
        note("`\(job.argv.dropFirst().joined(separator: " "))`: --dry-run planned \(topics.map(\.description).joined(separator: "; ")); "
             + "created through the embedded cluster's API; the command as written then found all three (exit 0, no warning)")
        return topics
    }

    /// SIGTERM to every running container (in reverse start order, as compose stops them; at once
    /// for pods); each must exit 0 within the grace period its file gives it.
    func stopAll(atOnce: Bool) async throws {
        var failures: [String] = []
        let order = Array(running.reversed())
        if atOnce { order.forEach { $0.process.signal(SIGTERM) } }
        var slowest: (String, Duration) = ("", .zero)
        for (spec, process, grace) in order {
            let started = ContinuousClock.now
            if !atOnce { process.signal(SIGTERM) }
            let status = await process.exitStatus(within: grace)
            let took = ContinuousClock.now - started
            if took > slowest.1 { slowest = (spec.name, took) }
            if status == nil {
                failures.append("\(spec.name) did not stop within its grace period (\(grace)) after SIGTERM: \(process.stderrTail(lines: 4))")
            } else if status != 0 {
                failures.append("\(spec.name) exited with status \(status!) after SIGTERM: \(process.stderrTail(lines: 4))")
            }
        }
        guard failures.isEmpty else { throw DeployRunFailure(failures.joined(separator: "\n")) }
        note("SIGTERM: every container exited 0 within its grace period (slowest: \(slowest.0), \(slowest.1.inWholeMilliseconds) ms)")
    }

    /// The last log lines of every running container (for a failure message).
    func logTails(lines: Int = 8) -> String {
        running.map { "--- \($0.spec.name):\n" + ($0.process.stdout + $0.process.stderr).split(separator: "\n").suffix(lines).joined(separator: "\n") }
            .joined(separator: "\n")
    }

    /// Warnings the programs log about the deployment itself: a secret file others can read.
    func checkLogs() throws {
        var failures: [String] = []
        for (spec, process, _) in running {
            for line in (process.stdout + process.stderr).split(separator: "\n") where line.contains("is accessible to other users") {
                failures.append("\(spec.name): \(line)")
            }
        }
        guard failures.isEmpty else { throw DeployRunFailure(failures.joined(separator: "\n")) }
    }

    /// Stops whatever still runs (after a failure) and removes the scratch directory.
    func tearDown() async {
        for (_, process, _) in running where process.isRunning { process.signal(SIGKILL) }
        for (_, process, _) in running { _ = await process.exitStatus(within: .seconds(10)) }
        await cluster?.shutdown()
        // DEPLOY_RUN_KEEP=1 keeps the generated files and each container's start.sh for a look.
        if ProcessInfo.processInfo.environment["DEPLOY_RUN_KEEP"] == "1" {
            print("deploy run: kept \(directory.path)")
        } else {
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// Random bytes as hex.
    static func randomHex(_ count: Int) -> String {
        Hex.random(bytes: count)
    }

    /// Runs a shell command on the host (openssl and coreutils to generate files); fails on a
    /// non-zero status.
    func shell(_ command: String, in directory: URL) async throws -> String {
        let result = try await ChildProcess.run("/bin/sh", ["-c", "cd \(ContainerRuntime.quote(directory.path)) && " + command],
                                                environment: ["PATH": DockerfileFacts.basePath], timeout: .seconds(60))
        guard result.status == 0 else { throw DeployRunFailure("generating files failed: \(command.prefix(120)): \(result.stderr)") }
        return result.stdout
    }
}
