import APNs
import APNsSimulator
import CallContract
import CallTracing
import CallpushCore
import FCM
import FCMSimulator
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Kafka
import Logging
import PushWorker
import ServiceLifecycle
import Locking
import DispatchService

/// The embedded system `callpush dev` runs: a mock Kafka cluster with the topics, the APNs
/// simulator (generated certificate and token key) and the FCM simulator (generated service
/// account), push-workers ringing iPhones through the one and Android phones through the other,
/// and dispatch on localhost with a generated API key. Tests start the same stack.
public struct DevStack: Sendable {
    public struct Options: Sendable {
        public var brokers = 3
        public var partitions = 6
        public var workers = 2
        /// The app name dev events use.
        public var app = "demo"
        public var bundleID = "com.example.callpush.demo"
        /// Where dispatch listens (0: any free port).
        public var dispatchHost = "127.0.0.1"
        public var dispatchPort = 8080
        /// Where the spans of dispatch and the workers go.
        public var traces = DevTraces.off

        public init(brokers: Int = 3, partitions: Int = 6, workers: Int = 2, dispatchPort: Int = 8080) {
            self.brokers = brokers
            self.partitions = partitions
            self.workers = workers
            self.dispatchPort = dispatchPort
        }
    }

    public let options: Options
    public let cluster: EmbeddedKafkaCluster
    public let simulator: APNSSimulator
    public let client: APNSClient
    public let fcmSimulator: FCMSimulator
    public let fcmClient: FCMClient
    public let workers: [PushWorkerService]
    public let dispatch: DispatchApp
    /// The generated dev API key (plaintext: dispatch keeps only its hash).
    public let apiKey: String
    let caPath: String
    let fcmCAPath: String
    /// The local trace collector (``DevTraces/local(port:)``).
    public let collector: TraceCollector?
    /// The span exporters of dispatch and the workers (when traced).
    let exporters: [any Service]

    /// In shutdown order last to first: dispatch stops first, then the workers, the clients,
    /// the simulators and Kafka; the span exporters flush after them, into the collector.
    public var services: [any Service] {
        (collector.map { [$0] } ?? []) + exporters + [cluster, simulator, fcmSimulator, client, fcmClient] + workers + dispatch.services
    }

    /// The tenant of the dev stack's one API key.
    public static let tenant = "dev"
    /// Kafka client settings for the embedded cluster: librdkafka's mock broker holds a fetch with
    /// no data for `fetch.wait.max.ms` and does not answer early when data arrives, so a short wait
    /// keeps rings and statuses prompt (a real broker answers as soon as data arrives). Each
    /// consumer then asks every broker 200 times a second when idle; docs/benchmarks.md has what
    /// that costs and what it gives.
    public static let embeddedKafkaProperties = ["fetch.wait.max.ms": "5", "topic.metadata.refresh.interval.ms": "2000"]

    public static func start(_ options: Options, logger: Logger) async throws -> DevStack {
        let (collector, backends) = try await startTracing(options.traces, logger: logger)
        var logger = logger
        // Log lines written inside a span carry its trace_id.
        if let provider = backends.first?.metadataProvider { logger.handler.metadataProvider = provider }
        let cluster = try EmbeddedKafkaCluster(brokers: options.brokers, logger: logger)
        for topic in [Topics.requests, Topics.status] {
            try cluster.createTopic(topic, partitions: options.partitions, replicationFactor: min(3, options.brokers))
        }
        try cluster.createTopic(Topics.deadLetter, partitions: 1, replicationFactor: min(3, options.brokers))

        let key = APNSSimulatorTestKey()
        var simulatorConfiguration = APNSSimulatorConfiguration()
        simulatorConfiguration.tokenKeys = [key.tokenKey]
        simulatorConfiguration.environment = .sandbox
        let simulator = APNSSimulator(configuration: simulatorConfiguration, logger: logger)
        try await simulator.start()

        // A fresh private directory (mkdtemp: unpredictable name, mode 0700): the CA written here
        // may be trusted by the user, so nobody else may have put it there or swap it later.
        let directory = try Self.privateDirectory(prefix: "callpush-dev-")
        let caPath = directory.appendingPathComponent("simulator-ca.pem").path
        try simulator.writeCACertificate(to: caPath)

        // The FCM simulator with its generated service account; the worker reads it as an apps file
        // would give it (token_uri pointing at the simulator).
        var fcmConfiguration = FCMSimulatorConfiguration()
        fcmConfiguration.host = "127.0.0.1"
        let fcmSimulator = try FCMSimulator(configuration: fcmConfiguration, logger: logger)
        try await fcmSimulator.start()
        let fcmCAPath = directory.appendingPathComponent("fcm-simulator-ca.pem").path
        try fcmSimulator.writeCACertificate(to: fcmCAPath)
        let fcmAccount = try FCMServiceAccount(json: Array(try fcmSimulator.serviceAccountJSON().utf8))
        let fcmClient = try FCMClient.localSimulator(port: fcmSimulator.port, caCertificatePEM: fcmSimulator.caCertificatePEM,
                                                     apps: [FCMAppID(options.app): FCMApp(serviceAccount: fcmAccount)], logger: logger)

        let clientConfiguration = APNSClientConfiguration.localSimulator(port: simulator.port, caCertificatePEM: simulator.caCertificatePEM)
        let signingKey = try APNSSigningKey(privateKey: key.privateKey, keyID: key.keyID, teamID: key.teamID)
        let client = try APNSClient(
            configuration: clientConfiguration,
            apps: [APNSAppID(options.app): APNSApp(bundleID: options.bundleID, credentials: .token(signingKey))],
            logger: logger)

        var secret = [UInt8](repeating: 0, count: 32)
        var generator = SystemRandomNumberGenerator()
        for index in secret.indices { secret[index] = UInt8.random(in: 0...255, using: &generator) }
        let ackTokens = try AckTokenSigner(secret: secret)
        let kafka = KafkaConfiguration(bootstrapServers: [cluster.bootstrapServers], clientID: "callpush-dev",
                                       properties: embeddedKafkaProperties)
        var workers: [PushWorkerService] = []
        for index in 0..<options.workers {
            var configuration = PushWorkerConfiguration(kafka: kafka, workerID: "dev-worker-\(index + 1)")
            configuration.sessionTimeout = .seconds(10)
            configuration.heartbeatInterval = .seconds(1)
            let sender = PlatformPushSender(apns: APNSPushSender(client: client), fcm: FCMPushSender(client: fcmClient))
            // Where the push-worker program runs its work: on the loops of the push connections (here NIO's shared group).
            workers.append(try PushWorkerService(configuration: configuration, sender: sender,
                                                 apps: [options.app], androidApps: [options.app], ackTokens: ackTokens, logger: logger,
                                                 tracing: backends.last?.tracing ?? .off,
                                                 executors: PushWorkerApp.taskExecutors(on: .singleton)))
        }

        let apiKey = "cpdev_" + randomHex(bytes: 24)
        var dispatchConfiguration = DispatchConfiguration(
            kafka: kafka, apps: [options.app], apiKeys: [APIKey(name: "dev", plaintext: apiKey, ratePerSecond: 1_000, tenant: Self.tenant)],
            ackSecret: secret, instanceID: "dev-dispatch")
        dispatchConfiguration.host = options.dispatchHost
        dispatchConfiguration.port = options.dispatchPort
        let dispatch = try DispatchApp(configuration: dispatchConfiguration, logger: logger, tracing: backends.first?.tracing ?? .off)
        return DevStack(options: options, cluster: cluster, simulator: simulator, client: client, fcmSimulator: fcmSimulator,
                        fcmClient: fcmClient, workers: workers, dispatch: dispatch, apiKey: apiKey, caPath: caPath, fcmCAPath: fcmCAPath,
                        collector: collector, exporters: backends.map(\.service))
    }

    /// The local collector (when asked for) and the exporters of dispatch and the workers, one
    /// each so spans carry their service's name (none when traces are off).
    static func startTracing(_ traces: DevTraces, logger: Logger) async throws -> (TraceCollector?, [TracingBackend]) {
        var collector: TraceCollector?
        let endpoint: String?
        // The local collector takes binary protobuf: its JSON costs far more to write and to read.
        var json = false
        switch traces {
        case .off:
            return (nil, [])
        case .local(let port, let capacity):
            var local = TraceCollector(store: TraceStore(capacity: capacity), port: port, logger: logger)
            do {
                try await local.start()
            } catch where port != 0 {
                // Taken (another dev, a real collector): any free port; the banner and the state file say which.
                local = TraceCollector(store: TraceStore(capacity: capacity), port: 0, logger: logger)
                try await local.start()
            }
            collector = local
            endpoint = local.tracesURL
        case .collector(let settings):
            endpoint = settings.tracesEndpoint
            json = settings.json
        }
        do {
            let backends = try ["dispatch", "push-worker"].map { name throws(ConfigurationError) in
                try TracingEnvironment.makeBackend(serviceName: name, tracesEndpoint: endpoint, json: json,
                                                   scheduleDelay: .milliseconds(100), logger: logger)
            }
            return (collector, backends)
        } catch {
            await collector?.stop()
            throw DevStackError("tracing: \(error)")
        }
    }

    /// A new directory under the temporary directory, made with `mkdtemp` (mode 0700, fails rather
    /// than reuse an existing one).
    static func privateDirectory(prefix: String) throws -> URL {
        var template = Array(FileManager.default.temporaryDirectory.appendingPathComponent(prefix + "XXXXXX").path.utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw DevStackError("cannot create a private temporary directory (errno \(errno))")
        }
        return URL(fileURLWithPath: String(cString: made))
    }

    static func randomHex(bytes count: Int) -> String {
        Hex.random(bytes: count)
    }

    /// Waits (bounded) until dispatch listens and every request partition has a worker, then
    /// describes the running system.
    public func ready(timeout: Duration = .seconds(60), abandonIf stopped: @Sendable () -> Bool = { false }) async throws -> DevState {
        let deadline = ContinuousClock.now + timeout
        let bound = Locked<Int?>(nil)
        let dispatch = self.dispatch
        let waiter = Task { let port = await dispatch.port(); bound.withLock { $0 = port } }
        defer { waiter.cancel() }
        // Start-up readiness: both conditions are checked every 50 ms, bounded by `timeout`.
        while bound.withLock({ $0 }) == nil || workers.reduce(0, { $0 + $1.ownedPartitions.count }) < options.partitions {
            if stopped() { throw DevStackError("stopped before it was ready") }
            guard ContinuousClock.now < deadline else {
                throw DevStackError(bound.withLock({ $0 }) == nil ? "dispatch did not start listening within \(timeout)"
                                    : "the push-workers were not assigned every partition within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        let port = bound.withLock { $0 } ?? options.dispatchPort
        return DevState(
            bootstrapServers: cluster.bootstrapServers,
            topics: .init(requests: Topics.requests, status: Topics.status, deadLetter: Topics.deadLetter),
            dispatchURL: "http://\(options.dispatchHost):\(port)", apiKey: apiKey,
            simulatorURL: "https://127.0.0.1:\(simulator.port)",
            simulatorAdminURL: simulator.adminPort.map { "http://127.0.0.1:\($0)" },
            caPath: caPath, app: options.app, workers: options.workers,
            fcmSimulatorURL: fcmSimulator.baseURL, fcmSimulatorAdminURL: fcmSimulator.adminPort.map { "http://127.0.0.1:\($0)" },
            fcmCAPath: fcmCAPath, traceURL: collector?.baseURL)
    }

    /// What `callpush dev` prints once ready.
    public static func banner(_ state: DevState) -> String {
        let admin = state.simulatorAdminURL ?? "(admin API off)"
        let fcmAdmin = state.fcmSimulatorAdminURL ?? "(admin API off)"
        return """
            callpush dev is running (Ctrl-C stops it)
              dispatch API       \(state.dispatchURL)
              dev API key        \(state.apiKey)
              Kafka bootstrap    \(state.bootstrapServers)
              topics             \(state.topics.requests), \(state.topics.status), \(state.topics.deadLetter)
              APNs simulator     \(state.simulatorURL)   (CA: \(state.caPath))
              simulator admin    \(admin)
              FCM simulator      \(state.fcmSimulatorURL ?? "-")   (CA: \(state.fcmCAPath ?? "-"))
              FCM admin          \(fcmAdmin)
              push-workers       \(state.workers), app "\(state.app)"
              traces             \(state.traceURL.map { "\($0)   (callpush status <callId> --trace\($0 == DevState.defaultTraceURL ? "" : " --trace-url \($0)"))" } ?? "(not kept here)")

            Ring a simulated iPhone and a simulated Android phone:
              curl -s -X POST \(state.dispatchURL)/v1/calls -H 'Authorization: Bearer \(state.apiKey)' -H 'Content-Type: application/json' \\
                -d '{"app":"\(state.app)","devices":[{"token":"'$(openssl rand -hex 32)'","environment":"sandbox"},{"platform":"android","token":"dev-'$(openssl rand -hex 8)':APA91b'$(openssl rand -hex 60)'"}],"caller":{"handle":"driver-1","displayName":"Driver Tanaka"}}'
            Then follow the call (use the callId from the answer), and see what the phones received:
              curl -s -N \(state.dispatchURL)/v1/calls/<callId>/events -H 'Authorization: Bearer \(state.apiKey)'
              curl -s \(admin)/admin/pushes
              curl -s \(fcmAdmin)/admin/messages
            """
    }
}

/// Where `callpush dev` sends the spans of dispatch and the workers.
public enum DevTraces: Sendable, Equatable {
    /// Nowhere (no tracing).
    case off
    /// Its own collector on 127.0.0.1:`port` (0: any free port), keeping the last `capacity`
    /// spans for `callpush status <callId> --trace`.
    case local(port: Int, capacity: Int = 20_000)
    /// The OTLP collector the `OTEL_*` variables name.
    case collector(TracingEnvironment.Settings)
}

/// `callpush dev` could not get ready.
public struct DevStackError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// The `--state-file` JSON: how scripts and tests reach a running `callpush dev`.
public struct DevState: Codable, Sendable, Equatable {
    public struct TopicNames: Codable, Sendable, Equatable {
        public var requests: String
        public var status: String
        public var deadLetter: String
    }

    public var bootstrapServers: String
    public var topics: TopicNames
    /// dispatch's base URL and the dev API key for it.
    public var dispatchURL: String
    public var apiKey: String
    public var simulatorURL: String
    public var simulatorAdminURL: String?
    public var caPath: String
    public var app: String
    public var workers: Int
    /// The FCM simulator (Android rings), its admin API and the CA its certificate chains to.
    public var fcmSimulatorURL: String?
    public var fcmSimulatorAdminURL: String?
    public var fcmCAPath: String?
    /// The local trace collector's base URL (`callpush status --trace-url`), when dev runs one.
    public var traceURL: String?
    /// Where `callpush status --trace` looks by default: dev's collector on its default port.
    public static let defaultTraceURL = "http://127.0.0.1:4318"

    /// Writes the state (it holds the dev API key) readable by its owner only: a temporary file
    /// created 0600 next to `path`, then renamed over it.
    func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(self)
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, 0o600)
        guard fd >= 0 else { throw DevStackError("cannot create \(temporary) (errno \(errno))") }
        let written = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == data.count, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw DevStackError("cannot write \(path) (errno \(errno))")
        }
    }
}
