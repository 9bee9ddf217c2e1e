import APNs
import APNsSimulator
import CallContract
import CallpushCore
import Foundation
import Kafka
import Logging
import PushWorker
import ServiceLifecycle

/// The embedded system `callpush dev` runs: a mock Kafka cluster with the topics, the APNs
/// simulator (generated certificate and token key), and push-workers pushing to it.
/// Tests start the same stack.
public struct DevStack: Sendable {
    public struct Options: Sendable {
        public var brokers = 3
        public var partitions = 6
        public var workers = 2
        /// The app name dev events use.
        public var app = "demo"
        public var bundleID = "com.example.callpush.demo"

        public init(brokers: Int = 3, partitions: Int = 6, workers: Int = 2) {
            self.brokers = brokers
            self.partitions = partitions
            self.workers = workers
        }
    }

    public let options: Options
    public let cluster: EmbeddedKafkaCluster
    public let simulator: APNsSimulator
    public let client: APNSClient
    public let workers: [PushWorkerService]
    public let state: DevState

    /// In shutdown order last to first: workers stop before the APNs client, the simulator and Kafka.
    public var services: [any Service] { [cluster, simulator, client] + workers }

    public static func start(_ options: Options, logger: Logger) async throws -> DevStack {
        let cluster = try EmbeddedKafkaCluster(brokers: options.brokers, logger: logger)
        for topic in [Topics.requests, Topics.status] {
            try cluster.createTopic(topic, partitions: options.partitions, replicationFactor: min(3, options.brokers))
        }
        try cluster.createTopic(Topics.deadLetter, partitions: 1, replicationFactor: min(3, options.brokers))

        let key = APNsSimulatorTestKey()
        var simulatorConfiguration = APNsSimulatorConfiguration()
        simulatorConfiguration.tokenKeys = [key.tokenKey]
        simulatorConfiguration.environment = .sandbox
        let simulator = APNsSimulator(configuration: simulatorConfiguration, logger: logger)
        try await simulator.start()

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("callpush-dev-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let caPath = directory.appendingPathComponent("simulator-ca.pem").path
        try simulator.writeCACertificate(to: caPath)

        var clientConfiguration = APNSClientConfiguration()
        let endpoint = APNSEndpoint(host: "127.0.0.1", port: simulator.port)
        clientConfiguration.productionEndpoint = endpoint
        clientConfiguration.sandboxEndpoint = endpoint
        clientConfiguration.additionalTrustedCAPEM = [simulator.caCertificatePEM]
        clientConfiguration.trustOnlyAdditionalCAs = true
        let signingKey = try APNSSigningKey(privateKey: key.privateKey, keyID: key.keyID, teamID: key.teamID)
        let client = try APNSClient(
            configuration: clientConfiguration,
            apps: [APNSAppID(options.app): APNSApp(bundleID: options.bundleID, credentials: .token(signingKey))],
            logger: logger)

        var secret = [UInt8](repeating: 0, count: 32)
        var generator = SystemRandomNumberGenerator()
        for index in secret.indices { secret[index] = UInt8.random(in: 0...255, using: &generator) }
        let ackTokens = try AckTokenSigner(secret: secret)
        let kafka = KafkaConfiguration(bootstrapServers: [cluster.bootstrapServers], clientID: "callpush-dev")
        var workers: [PushWorkerService] = []
        for index in 0..<options.workers {
            var configuration = PushWorkerConfiguration(kafka: kafka, workerID: "dev-worker-\(index + 1)")
            configuration.sessionTimeout = .seconds(10)
            configuration.heartbeatInterval = .seconds(1)
            workers.append(try PushWorkerService(configuration: configuration, sender: APNsPushSender(client: client),
                                                 apps: [options.app], ackTokens: ackTokens, logger: logger))
        }

        let state = DevState(
            bootstrapServers: cluster.bootstrapServers,
            topics: .init(requests: Topics.requests, status: Topics.status, deadLetter: Topics.deadLetter),
            simulatorURL: "https://127.0.0.1:\(simulator.port)",
            simulatorAdminURL: simulator.adminPort.map { "http://127.0.0.1:\($0)" },
            caPath: caPath, app: options.app, workers: options.workers)
        return DevStack(options: options, cluster: cluster, simulator: simulator, client: client, workers: workers, state: state)
    }

    /// What `callpush dev` prints once ready.
    public func banner() -> String {
        let admin = state.simulatorAdminURL ?? "(admin API off)"
        return """
            callpush dev is running (Ctrl-C stops it)
              Kafka bootstrap    \(state.bootstrapServers)
              topics             \(state.topics.requests), \(state.topics.status), \(state.topics.deadLetter)
              APNs simulator     \(state.simulatorURL)   (CA: \(state.caPath))
              simulator admin    \(admin)
              push-workers       \(state.workers), app "\(state.app)"

            Ring a simulated phone (publishes a ring event; dispatch's HTTP API comes later):
              id=$(cat /proc/sys/kernel/random/uuid); printf '{"type":"ring","callId":"%s","app":"\(state.app)","device":{"token":"%s","environment":"sandbox"},"caller":{"handle":"driver-1","displayName":"Driver Tanaka"},"requestedAt":"%s","ringDeadline":"%s"}' "$id" "$(openssl rand -hex 32)" "$(date -u +%FT%TZ)" "$(date -u -d '+30 sec' +%FT%TZ)" | kcat -P -b \(state.bootstrapServers) -t \(state.topics.requests) -k "$id"
            Then see the push the simulator received and the call's status:
              curl -s \(admin)/admin/pushes
              kcat -C -b \(state.bootstrapServers) -t \(state.topics.status) -o beginning -e -q
            """
    }
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
    public var simulatorURL: String
    public var simulatorAdminURL: String?
    public var caPath: String
    public var app: String
    public var workers: Int

    func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}
