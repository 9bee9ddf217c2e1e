import CallContract
import Foundation
import Kafka
import Testing
@testable import CallpushCLI

/// `callpush topics` against the embedded cluster. librdkafka's mock cluster has no
/// CreateTopics API, so creating a missing topic can only be tested as a clear failure here;
/// the layout checks run against existing topics.
@Suite(.serialized) struct TopicsCommands {
    /// The message `callpush topics create <arguments>` is refused with (empty, and recorded as a
    /// failure, when it is not refused).
    func createRefusal(_ arguments: [String]) async throws -> String {
        let command = try parse(TopicsCreateCommand.self, ["topics", "create"] + arguments)
        let error = await #expect(throws: CLIError.self) {
            try await command.execute(environment: [:], output: CapturedOutput().output)
        }
        return error?.message ?? ""
    }

    /// The cluster as the testbed's `callpush topics` settings reach it.
    func describeCluster(_ bed: CLITestbed) async throws -> KafkaClusterDescription {
        try await parse(TopicsDescribeCommand.self, ["topics", "describe"] + bed.flags).kafka
            .resolve(environment: [:], clientID: "t").describeCluster(logger: CLITestbed.logger)
    }

    @Test func createIsIdempotentWhenTheTopicsExistAsAsked() async throws {
        let bed = try CLITestbed.start(partitions: 2, dlqPartitions: 2)
        let output = CapturedOutput()
        let command = try parse(TopicsCreateCommand.self, ["topics", "create", "--partitions", "2", "--replication-factor", "1",
                                                           "--dlq-partitions", "2"] + bed.flags)
        try await command.execute(environment: [:], output: output.output)
        #expect(output.out.count == 3 && output.out.allSatisfy { $0.hasPrefix("exists") }, "\(output.out)")
        #expect(output.error.isEmpty)
        await bed.stop()
    }

    @Test func createRefusesAPartitionMismatchAndCreatesNothing() async throws {
        let bed = try CLITestbed.start(partitions: 2)
        let message = try await createRefusal(["--partitions", "12", "--replication-factor", "1"] + bed.flags)
        #expect(message.contains("exists with 2 partitions, not 12") && message.contains("--partitions 2") && message.contains("nothing was created"))

        // Requests and status differ: refused whatever --partitions says.
        let other = "status-other-\(UUID().uuidString.prefix(6))"
        try bed.cluster.createTopic(other, partitions: 3)
        let differ = try await createRefusal(["--partitions", "2", "--replication-factor", "1"] + bed.flags + ["--topic-status", other])
        #expect(differ.contains("must have the same count"))
        await bed.stop()
    }

    @Test func aReplicationFactorAboveTheBrokerCountIsRefused() async throws {
        let bed = try CLITestbed.start(partitions: 2)
        let message = try await createRefusal(["--partitions", "2"] + bed.flags)
        #expect(message.contains("replication factor 3 needs at least that many brokers; the cluster has 1"))
        await bed.stop()
    }

    @Test func creatingAMissingTopicOnTheMockClusterFailsClearly() async throws {
        let bed = try CLITestbed.start(partitions: 2)
        let missing = "dlq-missing-\(UUID().uuidString.prefix(6))"
        let command = try parse(TopicsCreateCommand.self, ["topics", "create", "--partitions", "2", "--replication-factor", "1"]
                                + bed.flags + ["--topic-dlq", missing, "--connect-timeout", "3s"])
        let output = CapturedOutput()
        do {
            try await command.execute(environment: [:], output: output.output)
            // A future mock with CreateTopics: then the topic must really exist.
            let cluster = try await describeCluster(bed)
            #expect(cluster.topics[missing] != nil)
        } catch let error as CLIError {
            #expect(error.message.contains("did not create the topics"), "\(error.message)")
            #expect(!error.message.contains("\n"))
        }
        await bed.stop()
    }

    /// --dry-run names what is missing with every config it would set, and creates nothing (on
    /// the mock cluster a real create fails, so "nothing" shows as the topic still missing).
    @Test func dryRunPrintsTheMissingTopicsWithTheirConfigsAndCreatesNothing() async throws {
        let bed = try CLITestbed.start(partitions: 2)
        let missing = "dlq-missing-\(UUID().uuidString.prefix(6))"
        let output = CapturedOutput()
        try await parse(TopicsCreateCommand.self, ["topics", "create", "--partitions", "2", "--replication-factor", "1",
                                                   "--dlq-partitions", "4", "--dlq-retention", "10d", "--config", "cleanup.policy=delete",
                                                   "--dry-run"] + bed.flags + ["--topic-dlq", missing])
            .execute(environment: [:], output: output.output)
        #expect(output.out.filter { $0.hasPrefix("exists") }.count == 2, "\(output.out)")
        #expect(output.out.contains("would create  \(missing)  partitions=4  replication=1  "
                                    + "configs=cleanup.policy=delete,min.insync.replicas=1,retention.ms=864000000"), "\(output.out)")
        let cluster = try await describeCluster(bed)
        #expect(cluster.topics[missing] == nil)
        await bed.stop()
    }

    @Test func describeShowsTheTopicsAndFailsWhenOneIsMissing() async throws {
        let bed = try CLITestbed.start(partitions: 2)
        let output = CapturedOutput()
        let status = try await parse(TopicsDescribeCommand.self, ["topics", "describe"] + bed.flags).execute(environment: [:], output: output.output)
        #expect(status == 0)
        #expect(output.out.contains { $0.hasPrefix(bed.topics.requests) && $0.contains(" 2 ") })
        await #expect(throws: CLIError.self) {
            _ = try await parse(TopicsDescribeCommand.self, ["topics", "describe"] + bed.flags + ["--topic-dlq", "absent-topic"])
                .execute(environment: [:], output: CapturedOutput().output)
        }
        await bed.stop()
    }

    @Test func thePlanCreatesOnlyWhatIsMissing() {
        let requests = KafkaNewTopic(name: "r", partitions: 6, replicationFactor: 3)
        let status = KafkaNewTopic(name: "s", partitions: 6, replicationFactor: 3)
        let dlq = KafkaNewTopic(name: "d", partitions: 3, replicationFactor: 3)
        let cluster = KafkaClusterDescription(brokers: ["a:1", "b:1", "c:1"],
                                              topics: ["r": KafkaTopicDescription(name: "r", partitions: 6, replicationFactor: 3)])
        let plan = TopicPlan.make(requests: requests, status: status, deadLetter: dlq, cluster: cluster)
        #expect(plan.problems.isEmpty)
        #expect(plan.create.map(\.name) == ["s", "d"])
        #expect(plan.existing.map(\.name) == ["r"])
    }
}
