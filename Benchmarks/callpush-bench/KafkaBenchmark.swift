import ArgumentParser
import Foundation
import Kafka
import Logging

/// Our producer and consumer vs kcat (plain librdkafka) on an embedded 3-broker cluster:
/// same message count, size, partition count and idempotence setting.
struct KafkaBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kafka",
        abstract: "Kafka layer (producer, consumer) vs kcat on an embedded cluster; prints msg/s and ratios."
    )

    @Option(help: "Messages per run.") var messages = 200_000
    @Option(help: "Message size in bytes.") var size = 330
    @Option(help: "Partitions per topic (the mock cluster keeps ~13k messages of 330 B per partition).") var partitions = 32
    @Option(help: "Brokers in the embedded cluster.") var brokers = 3
    @Option(help: "Records per send call.") var batch = 5_000
    @Option(help: "Send calls in flight at once.") var concurrency = 4
    @Flag(help: "Skip the kcat comparison.") var skipKcat = false

    func run() async throws {
        var logger = Logger(label: "callpush-bench.kafka")
        logger.logLevel = .error
        let cluster = try EmbeddedKafkaCluster(brokers: brokers, logger: logger)
        let ourTopic = "bench-ours"
        let kcatTopic = "bench-kcat"
        try cluster.createTopic(ourTopic, partitions: partitions)
        try cluster.createTopic(kcatTopic, partitions: partitions)
        print("kafka benchmark: \(messages) messages of \(size) B, \(partitions) partitions, \(brokers) brokers, idempotent producers")

        let ours = try await measureOurs(cluster: cluster, topic: ourTopic, logger: logger)
        print(String(format: "ours: producer %.0f msg/s, consumer %.0f msg/s", ours.produce, ours.consume))
        if !skipKcat {
            let kcat = try await measureKcat(cluster: cluster, topic: kcatTopic)
            print(String(format: "kcat: producer %.0f msg/s, consumer %.0f msg/s", kcat.produce, kcat.consume))
            print(String(format: "producer: ours=%.0f msg/s kcat=%.0f msg/s ratio=%.2f", ours.produce, kcat.produce, ours.produce / kcat.produce))
            print(String(format: "consumer: ours=%.0f msg/s kcat=%.0f msg/s ratio=%.2f", ours.consume, kcat.consume, ours.consume / kcat.consume))
        }
        await cluster.shutdown()
    }

    private var payload: [UInt8] {
        (0..<max(size, 1)).map { UInt8(ascii: "a") + UInt8($0 % 26) }
    }

    private func measureOurs(cluster: EmbeddedKafkaCluster, topic: String, logger: Logger) async throws -> (produce: Double, consume: Double) {
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: [cluster.bootstrapServers]),
            logger: logger
        )
        // Warm up connections and the producer id outside the timed part (kcat's timing includes
        // its start-up, which favours us by a few ms at most).
        _ = try await producer.send(KafkaProducerRecord(topic: topic, value: payload))
        let record = KafkaProducerRecord(topic: topic, value: payload)
        let chunks = stride(from: 1, to: messages, by: batch).map { ($0, min(batch, messages - $0)) }
        let produceStart = ContinuousClock.now
        var failures = 0
        try await withThrowingTaskGroup(of: Int.self) { group in
            var next = 0
            func addChunk() {
                let count = chunks[next].1
                next += 1
                group.addTask {
                    let results = try await producer.send([KafkaProducerRecord](repeating: record, count: count))
                    return results.reduce(0) { failed, result in
                        if case .failure = result { return failed + 1 }
                        return failed
                    }
                }
            }
            while next < min(concurrency, chunks.count) { addChunk() }
            while let failed = try await group.next() {
                failures += failed
                if next < chunks.count { addChunk() }
            }
        }
        let produceTime = ContinuousClock.now - produceStart
        await producer.shutdown()
        if failures > 0 { print("ours: \(failures) delivery failures") }
        print(String(format: "ours: producer %.0f msg/s (all acknowledged)", Double(messages - 1) / produceTime.seconds))

        var consumerConfiguration = KafkaConsumerConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: [cluster.bootstrapServers]),
            mode: .manual
        )
        consumerConfiguration.maxBufferedMessages = 50_000
        let consumeStart = ContinuousClock.now
        let consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: logger)
        try await consumer.assign((0..<Int32(partitions)).map { KafkaPartitionAssignment(topic: topic, partition: $0, start: .beginning) })
        var received = 0
        var bytes = 0
        for try await message in consumer.messages {
            received += 1
            bytes &+= message.value.count
            if received == messages { break }
        }
        let consumeTime = ContinuousClock.now - consumeStart
        await consumer.shutdown()
        return (Double(messages - 1) / produceTime.seconds, Double(received) / consumeTime.seconds)
    }

    private func measureKcat(cluster: EmbeddedKafkaCluster, topic: String) async throws -> (produce: Double, consume: Double) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("callpush-bench-\(getpid()).txt")
        let line = String(decoding: payload.dropLast(), as: UTF8.self) + "\n"
        try String(repeating: line, count: messages).write(to: file, atomically: false, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let bootstrap = cluster.bootstrapServers
        let produceTime = try await timeProcess("kcat", [
            "-P", "-b", bootstrap, "-t", topic, "-X", "enable.idempotence=true", "-X", "acks=all", "-l", file.path,
        ])
        let consumeTime = try await timeProcess("kcat", [
            "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-c", String(messages), "-q",
        ])
        return (Double(messages) / produceTime.seconds, Double(messages) / consumeTime.seconds)
    }

    private func timeProcess(_ name: String, _ arguments: [String]) async throws -> Duration {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [name] + arguments
        process.standardOutput = FileHandle.nullDevice
        let start = ContinuousClock.now
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        let elapsed = ContinuousClock.now - start
        guard status == 0 else { throw ValidationError("\(name) \(arguments.first ?? "") exited with \(status)") }
        return elapsed
    }
}

