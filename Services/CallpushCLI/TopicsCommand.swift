import ArgumentParser
import CallContract
import Foundation
import Kafka

/// `callpush topics`: create and describe the three topics on a real cluster.
struct TopicsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "topics",
        abstract: "Create or describe the requests, status and dead-letter topics.",
        subcommands: [TopicsCreateCommand.self, TopicsDescribeCommand.self]
    )
}

/// `callpush topics create`.
struct TopicsCreateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create the three topics (idempotent: topics that exist as asked are left alone).",
        discussion: """
            Requests and status get --partitions and --retention; the DLQ gets --dlq-partitions and \
            the longer --dlq-retention. min.insync.replicas is 2 when the replication factor is 3 or \
            more, else 1. Refuses (creating nothing) when requests and status would have different \
            partition counts, or an existing one has another count than asked. With --dry-run, prints \
            what it would create (partitions, replication and every topic config) and creates nothing.
            """
    )

    @OptionGroup var kafka: KafkaOptions

    @Option(help: "Partitions of the requests and status topics (the worker group's parallelism).")
    var partitions = 12

    @Option(help: "Replication factor of all three topics.")
    var replicationFactor = 3

    @Option(help: "Retention of the requests and status topics.")
    var retention = DurationArgument(.seconds(7 * 86_400))

    @Option(help: "Partitions of the dead-letter topic.")
    var dlqPartitions = 3

    @Option(help: "Retention of the dead-letter topic (long enough to investigate and replay).")
    var dlqRetention = DurationArgument(.seconds(30 * 86_400))

    @Option(name: .customLong("config"), help: ArgumentHelp("An extra topic config key=value for all three, repeatable.", valueName: "key=value"))
    var configs: [String] = []

    @Flag(help: "Print the topics that would be created, with their configs, and create nothing.")
    var dryRun = false

    func validate() throws {
        guard (1...10_000).contains(partitions) else { throw ValidationError("--partitions must be between 1 and 10000") }
        guard (1...10_000).contains(dlqPartitions) else { throw ValidationError("--dlq-partitions must be between 1 and 10000") }
        guard (1...32).contains(replicationFactor) else { throw ValidationError("--replication-factor must be between 1 and 32") }
        guard retention.duration >= .seconds(60), dlqRetention.duration >= .seconds(60) else {
            throw ValidationError("--retention and --dlq-retention must be at least 1m")
        }
        for config in configs {
            guard let equals = config.firstIndex(of: "="), equals != config.startIndex else {
                throw ValidationError("--config expects key=value, got '\(config.prefix(40))'")
            }
        }
    }

    /// The three topic specifications for these options.
    func specifications(_ topics: TopicNames) -> (requests: KafkaNewTopic, status: KafkaNewTopic, deadLetter: KafkaNewTopic) {
        var common: [String: String] = ["min.insync.replicas": replicationFactor >= 3 ? "2" : "1"]
        for config in configs {
            guard let equals = config.firstIndex(of: "=") else { continue }
            common[String(config[..<equals])] = String(config[config.index(after: equals)...])
        }
        func spec(_ name: String, _ partitions: Int, _ retention: DurationArgument) -> KafkaNewTopic {
            var configs = common
            configs["retention.ms"] = configs["retention.ms"] ?? String(retention.duration.components.seconds * 1000)
            return KafkaNewTopic(name: name, partitions: partitions, replicationFactor: replicationFactor, configs: configs)
        }
        return (spec(topics.requests, partitions, retention), spec(topics.status, partitions, retention),
                spec(topics.deadLetter, dlqPartitions, dlqRetention))
    }

    func run() async throws {
        try await CommandRunner.run("topics create") {
            try await execute(environment: ProcessInfo.processInfo.environment, output: .standard)
            return CLIExit.success
        }
    }

    /// Creates what is missing and reports each topic (tests call it in-process).
    func execute(environment: [String: String], output: CommandOutput) async throws {
        let resolved = try kafka.resolve(environment: environment, clientID: "callpush-topics")
        let logger = CLILogger.make("callpush.topics", environment: environment)
        let cluster = try await resolved.describeCluster(logger: logger)
        let specs = specifications(resolved.topics)
        let plan = TopicPlan.make(requests: specs.requests, status: specs.status, deadLetter: specs.deadLetter, cluster: cluster)
        for warning in plan.warnings { output.error("warning: \(warning)") }
        guard plan.problems.isEmpty else {
            throw CLIError("topic-layout", plan.problems.joined(separator: "; ") + " — nothing was created")
        }
        for topic in plan.existing { output.line("exists   \(topic.name)  partitions=\(topic.partitions)  replication=\(topic.replicationFactor)") }
        if dryRun {
            for topic in plan.create {
                let configs = topic.configs.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
                output.line("would create  \(topic.name)  partitions=\(topic.partitions)  replication=\(topic.replicationFactor)  configs=\(configs)")
            }
            return
        }
        guard !plan.create.isEmpty else { return }
        let admin: KafkaAdminClient
        do {
            admin = try KafkaAdminClient(configuration: resolved.configuration, logger: logger)
        } catch {
            throw CLIError.usage("Kafka configuration: \(error.message)")
        }
        let results: [KafkaTopicCreationResult]
        do {
            results = try await admin.createTopics(plan.create, timeout: max(resolved.connectTimeout, .seconds(10)))
            await admin.shutdown()
        } catch {
            await admin.shutdown()
            let hint = error.code.rawValue == "_TIMED_OUT" || error.code.rawValue == "_UNSUPPORTED_FEATURE"
                ? "; does the cluster support CreateTopics? (librdkafka's mock cluster does not)" : ""
            throw CLIError("kafka-error", "the cluster at \(resolved.bootstrapText) did not create the topics: "
                           + "\(error.message) (\(error.code))\(hint)")
        }
        var failures: [String] = []
        for topic in plan.create {
            let result = results.first { $0.name == topic.name }
            if let error = result?.error, error.code.rawValue != "TOPIC_ALREADY_EXISTS" {
                failures.append("\(topic.name): \(error.message) (\(error.code))")
            } else if result == nil {
                failures.append("\(topic.name): no answer from the cluster")
            } else {
                let retention = DurationArgument.format(.milliseconds(Int64(topic.configs["retention.ms"] ?? "0") ?? 0))
                output.line("created  \(topic.name)  partitions=\(topic.partitions)  replication=\(topic.replicationFactor)  retention=\(retention)")
            }
        }
        if !failures.isEmpty { throw CLIError("create-topics", "could not create " + failures.joined(separator: "; ")) }
    }
}
