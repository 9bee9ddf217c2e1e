import ArgumentParser
import CallContract
import CallpushTestSupport
import Foundation
import Kafka
import Logging
import Testing
@testable import CallpushCLI

/// Shared helpers for the CLI tests: a cluster with unique topics, records, bounded reads.
struct CLITestbed {
    static let logger: Logger = .quietTestLogger(label: "cli-tests", levelFrom: "CLI_TEST_LOG", default: .critical)

    let cluster: EmbeddedKafkaCluster
    let topics: TopicNames

    /// A one-broker cluster with the three topics under unique names.
    static func start(partitions: Int = 2, dlqPartitions: Int = 2) throws -> CLITestbed {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        let suffix = UUID().uuidString.prefix(8).lowercased()
        var topics = TopicNames()
        topics.requests = "requests-\(suffix)"
        topics.status = "status-\(suffix)"
        topics.deadLetter = "dlq-\(suffix)"
        try cluster.createTopic(topics.requests, partitions: partitions)
        try cluster.createTopic(topics.status, partitions: partitions)
        try cluster.createTopic(topics.deadLetter, partitions: dlqPartitions)
        return CLITestbed(cluster: cluster, topics: topics)
    }

    func stop() async { await cluster.shutdown() }

    /// The flags naming this cluster and its topics.
    var flags: [String] {
        ["--bootstrap", cluster.bootstrapServers, "--topic-requests", topics.requests, "--topic-status", topics.status,
         "--topic-dlq", topics.deadLetter]
    }

    var kafka: KafkaConfiguration {
        KafkaConfiguration(bootstrapServers: [cluster.bootstrapServers], clientID: "cli-test")
    }

    func produce(_ records: [KafkaProducerRecord]) async throws {
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(kafka: kafka), logger: Self.logger)
        for result in try await producer.send(records) { _ = try result.get() }
        await producer.shutdown()
    }

    /// Every record of `topic` (all partitions, from the beginning to the end at call time).
    func readAll(_ topic: String, partitions: Int32) async throws -> [KafkaConsumerMessage] {
        let consumer = try KafkaConsumer(configuration: KafkaConsumerConfiguration(kafka: kafka, mode: .manual), logger: Self.logger)
        var expected = 0
        for partition in 0..<partitions {
            let marks = try await consumer.queryWatermarks(topic: topic, partition: partition)
            expected += Int(marks.high - marks.low)
        }
        guard expected > 0 else {
            await consumer.shutdown()
            return []
        }
        try await consumer.assign((0..<partitions).map { KafkaPartitionAssignment(topic: topic, partition: $0, start: .beginning) })
        let timer = Task {
            try? await Task.sleep(for: .seconds(20))
            await consumer.shutdown()
        }
        defer { timer.cancel() }
        var messages: [KafkaConsumerMessage] = []
        for try await message in consumer.messages {
            messages.append(message)
            if messages.count == expected { break }
        }
        await consumer.shutdown()
        return messages
    }

    static func ring(app: String = "rider", deadline: TimeInterval = 60, requestedAgo: TimeInterval = 5, replay: Int = 0,
                     token: String = String(repeating: "ab", count: 32)) -> RingRequest {
        let now = Date()
        return RingRequest(callId: CallID.make(), app: app, device: Device(token: token, environment: .sandbox, id: "phone-1"),
                           caller: Caller(handle: "driver-7", displayName: "Driver Tanaka"), hasVideo: true,
                           requestedAt: ContractCoding.truncatedToMilliseconds(now.addingTimeInterval(-requestedAgo)),
                           ringDeadline: ContractCoding.truncatedToMilliseconds(now.addingTimeInterval(deadline)),
                           maxDurationSeconds: 300, attributes: ["rideId": "R-1"], replay: replay)
    }

    /// A DLQ record as the worker writes it.
    func deadLetter(_ value: [UInt8], callId: String, error: String, failedAt: Date = Date(), partition: Int32 = 0) -> KafkaProducerRecord {
        KafkaProducerRecord(topic: topics.deadLetter, partition: partition, key: Array(callId.utf8), value: value, headers: [
            KafkaHeader(key: DeadLetterHeader.error, string: error),
            KafkaHeader(key: DeadLetterHeader.reason, string: "test"),
            KafkaHeader(key: DeadLetterHeader.attempts, string: "1"),
            KafkaHeader(key: DeadLetterHeader.failedAt, string: ContractCoding.format(failedAt)),
        ])
    }

    func deadLetter(_ ring: RingRequest, error: String, failedAt: Date = Date(), partition: Int32 = 0) throws -> KafkaProducerRecord {
        deadLetter(Array(try CallRequest.ring(ring).encoded()), callId: ring.callId, error: error, failedAt: failedAt, partition: partition)
    }
}

/// Parses `arguments` as the root command would and returns the subcommand.
func parse<Command: ParsableCommand>(_ type: Command.Type, _ arguments: [String]) throws -> Command {
    let parsed = try CallpushCommand.parseAsRoot(arguments)
    return try #require(parsed as? Command, "parsed as \(Swift.type(of: parsed))")
}
