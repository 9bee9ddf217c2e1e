import ArgumentParser
import Foundation
import Kafka

/// `callpush topics describe`.
struct TopicsDescribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "describe",
        abstract: "Show the three topics' partitions and replication; fail if one is missing or requests and status differ."
    )

    @OptionGroup var kafka: KafkaOptions

    func run() async throws {
        try await CommandRunner.run("topics describe") {
            try await execute(environment: ProcessInfo.processInfo.environment, output: .standard)
        }
    }

    /// Prints the table; returns the exit status (tests call it in-process).
    func execute(environment: [String: String], output: CommandOutput) async throws -> Int32 {
        let resolved = try kafka.resolve(environment: environment, clientID: "callpush-topics")
        let cluster = try await resolved.describeCluster(logger: CLILogger.make("callpush.topics", environment: environment))
        output.line("cluster: \(cluster.brokers.count) brokers")
        output.line("TOPIC                            PARTITIONS  REPLICATION  LEADERLESS")
        let names = [resolved.topics.requests, resolved.topics.status, resolved.topics.deadLetter]
        var missing: [String] = []
        for name in names {
            guard let topic = cluster.topics[name] else {
                missing.append(name)
                output.line(name.padding(toLength: 33, withPad: " ", startingAt: 0) + "missing")
                continue
            }
            output.line(name.padding(toLength: 33, withPad: " ", startingAt: 0)
                        + String(topic.partitions).padding(toLength: 12, withPad: " ", startingAt: 0)
                        + String(topic.replicationFactor).padding(toLength: 13, withPad: " ", startingAt: 0)
                        + String(topic.partitionsWithoutLeader))
        }
        if !missing.isEmpty {
            throw CLIError("topic-missing", "missing: \(missing.joined(separator: ", ")) (create them with `callpush topics create`)")
        }
        if let requests = cluster.topics[names[0]], let status = cluster.topics[names[1]], requests.partitions != status.partitions {
            throw CLIError("topic-layout", "\(names[0]) has \(requests.partitions) partitions but \(names[1]) \(status.partitions): "
                           + "they must be equal (statuses are co-partitioned with requests)")
        }
        return CLIExit.success
    }
}
