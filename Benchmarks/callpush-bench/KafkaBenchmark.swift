import ArgumentParser
import Foundation
import Kafka
import Logging
import Locking

/// Our producer and consumer vs kcat (plain librdkafka) on an embedded 3-broker cluster:
/// same message count, size, partition count and producer properties, in the same run.
///
/// Fairness: both producers use exactly ``producerProperties`` (idempotent, acks=all, the
/// same linger and partitioner); both consumers start at the beginning and stop at the end of
/// the data. Each side is timed from client creation to the last acknowledgement / message
/// (kcat's figure also includes its process start, a few ms).
struct KafkaBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kafka",
        abstract: "Kafka layer (producer, consumer) vs kcat on an embedded cluster; prints msg/s and ratios."
    )

    @Option(help: "Messages per run.") var messages = 200_000
    @Option(help: "Message size in bytes.") var size = 330
    @Option(help: "Partitions per topic (the mock cluster keeps ~14k messages of 330 B per partition).") var partitions = 32
    @Option(help: "Brokers in the embedded cluster.") var brokers = 3
    @Option(help: "Records per send call.") var batch = 25_000
    @Option(help: "Send calls in flight at once (batch × concurrency = kcat's 100,000-message local queue).") var concurrency = 4
    @Option(help: "Give up (and fail) if a phase takes longer than this many seconds.") var timeout = 120.0
    @Option(help: "Our consumer's maxBufferedMessages (default: the library's default).") var buffer: Int?
    @Option(help: "Rounds (fresh topics each); the ratio uses the medians.") var rounds = 1
    @Flag(help: "Skip the kcat comparison.") var skipKcat = false
    @Flag(help: "Skip our producer and consumer (kcat only).") var skipOurs = false
    @Flag(help: "Skip the consumers (producers only, e.g. for profiling).") var skipConsumers = false
    @Option(help: "sticky.partitioning.linger.ms for both producers (librdkafka's default is 10; see the type's docs).")
    var stickyLingerMs = 0

    /// The producer properties both sides use. `sticky.partitioning.linger.ms=0` spreads keyless
    /// messages evenly: with librdkafka's default (10 ms) a whole 10 ms burst goes to one partition,
    /// so at these rates a few partitions receive more than the mock cluster keeps (~14k messages of
    /// 330 B, 5 MB per partition) and it silently drops their oldest messages.
    var producerProperties: [String: String] {
        [
            "enable.idempotence": "true",
            "acks": "all",
            "linger.ms": "5",
            "queue.buffering.max.messages": "100000",
            "sticky.partitioning.linger.ms": String(stickyLingerMs),
        ]
    }

    func run() async throws {
        var logger = Logger(label: "callpush-bench.kafka")
        logger.logLevel = .error
        let cluster = try EmbeddedKafkaCluster(brokers: brokers, logger: logger)
        print("kafka benchmark: \(messages) messages of \(size) B, \(partitions) partitions, \(brokers) brokers, \(rounds) round(s)")
        print("producer properties (both): \(producerProperties.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("callpush-bench-\(getpid()).txt")
        if !skipKcat {
            let line = String(decoding: payload.dropLast(), as: UTF8.self) + "\n"
            try String(repeating: line, count: messages).write(to: file, atomically: false, encoding: .utf8)
        }
        defer { try? FileManager.default.removeItem(at: file) }

        // Each phase runs ours then kcat back to back, so both see the same machine load.
        var figures: [String: [Double]] = [:]
        for round in 1...rounds {
            let ourTopic = "bench-ours-\(round)"
            let kcatTopic = "bench-kcat-\(round)"
            try cluster.createTopic(ourTopic, partitions: partitions)
            try cluster.createTopic(kcatTopic, partitions: partitions)
            if !skipOurs { figures["ours.producer", default: []].append(try await produceOurs(cluster: cluster, topic: ourTopic, logger: logger)) }
            if !skipKcat { figures["kcat.producer", default: []].append(try await produceKcat(cluster: cluster, topic: kcatTopic, file: file)) }
            if skipConsumers { continue }
            // Both consumers read the same topic: the mock broker answers a fetch with one stored
            // message set per partition, so how a topic was batched by its producer sets the
            // number of fetch round trips (kcat's topic when kcat ran, else ours).
            let readTopic = skipKcat ? ourTopic : kcatTopic
            let cpu0 = Self.cpuSeconds()
            if !skipOurs { figures["ours.consumer", default: []].append(try await consumeOurs(cluster: cluster, topic: readTopic, logger: logger)) }
            let cpu1 = Self.cpuSeconds()
            if !skipKcat { figures["kcat.consumer", default: []].append(try await consumeKcat(cluster: cluster, topic: readTopic, logger: logger)) }
            let cpu2 = Self.cpuSeconds()
            if ProcessInfo.processInfo.environment["KAFKA_BENCH_DEBUG"] != nil {
                print(String(format: "cpu s (self, children): ours consumer phase %.2f, %.2f; kcat consumer phase %.2f, %.2f",
                             cpu1.0 - cpu0.0, cpu1.1 - cpu0.1, cpu2.0 - cpu1.0, cpu2.1 - cpu1.1))
            }
        }
        for role in ["producer", "consumer"] {
            guard let ours = figures["ours.\(role)"]?.median, let kcat = figures["kcat.\(role)"]?.median else { continue }
            print(String(format: "%@: ours=%.0f msg/s kcat=%.0f msg/s ratio=%.2f%@", role, ours, kcat, ours / kcat, rounds > 1 ? " (medians)" : ""))
        }
        await cluster.shutdown()
    }

    /// CPU seconds (user + system) of this process and of its finished children.
    private static func cpuSeconds() -> (Double, Double) {
        func seconds(_ who: Int32) -> Double {
            var usage = rusage()
            getrusage(__rusage_who_t(who), &usage)
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        }
        return (seconds(RUSAGE_SELF.rawValue), seconds(RUSAGE_CHILDREN.rawValue))
    }

    private var payload: [UInt8] {
        (0..<max(size, 1)).map { UInt8(ascii: "a") + UInt8($0 % 26) }
    }

    /// Produces `messages` records with our producer; returns msg/s from creation to the last acknowledgement.
    private func produceOurs(cluster: EmbeddedKafkaCluster, topic: String, logger: Logger) async throws -> Double {
        var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: [cluster.bootstrapServers])
        producerConfiguration.kafka.properties.merge(producerProperties) { _, new in new }
        let record = KafkaProducerRecord(topic: topic, value: payload)
        let chunks = stride(from: 0, to: messages, by: batch).map { min(batch, messages - $0) }
        let produceStart = ContinuousClock.now
        let producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)
        let failures = try await withDeadline("our producer", seconds: timeout) { [concurrency] in
            try await withThrowingTaskGroup(of: Int.self) { group in
                var next = 0
                var failures = 0
                func addChunk() {
                    let count = chunks[next]
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
                return failures
            }
        }
        let produceTime = ContinuousClock.now - produceStart
        await producer.shutdown()
        if failures > 0 { print("ours: \(failures) delivery failures") }
        let produceRate = Double(messages - failures) / produceTime.inSeconds
        print(String(format: "ours: producer %.0f msg/s (all acknowledged, %.3f s)", produceRate, produceTime.inSeconds))
        return produceRate
    }

    /// Reads every stored message with our consumer; returns msg/s from creation to the last message.
    private func consumeOurs(cluster: EmbeddedKafkaCluster, topic: String, logger: Logger) async throws -> Double {
        let expected = try await storedMessages(cluster: cluster, topic: topic, logger: logger)
        let (received, consumeTime) = try await consumeAll(cluster: cluster, topic: topic, expected: expected, logger: logger)
        let consumeRate = Double(received) / consumeTime.inSeconds
        print(String(format: "ours: consumer %.0f msg/s (%d messages, %.3f s)", consumeRate, received, consumeTime.inSeconds))
        return consumeRate
    }

    /// Reads every stored message of `topic` from the beginning with our consumer.
    private func consumeAll(cluster: EmbeddedKafkaCluster, topic: String, expected: Int, logger: Logger) async throws -> (Int, Duration) {
        var consumerConfiguration = KafkaConsumerConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: [cluster.bootstrapServers]),
            mode: .manual
        )
        if let buffer { consumerConfiguration.maxBufferedMessages = buffer }
        var logger = logger
        if let debug = ProcessInfo.processInfo.environment["KAFKA_BENCH_RDDEBUG"] {
            consumerConfiguration.kafka.properties["debug"] = debug
            logger.logLevel = .debug
        }
        let consumeStart = ContinuousClock.now
        let consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: logger)
        do {
            let received = try await withDeadline("our consumer", seconds: timeout) { [partitions] in
                try await consumer.assign((0..<Int32(partitions)).map { KafkaPartitionAssignment(topic: topic, partition: $0, start: .beginning) })
                var received = 0
                var bytes = 0
                let debug = ProcessInfo.processInfo.environment["KAFKA_BENCH_DEBUG"] != nil
                // With KAFKA_BENCH_DEBUG: when each tenth of the messages had arrived (finds stalls).
                var marks: [String] = []
                for try await message in consumer.messages {
                    if received == 0, debug {
                        print("ours: first message after \(ContinuousClock.now - consumeStart)")
                    }
                    received += 1
                    bytes &+= message.value.count
                    if debug, received % max(1, expected / 10) == 0 {
                        let elapsed = ContinuousClock.now - consumeStart
                        marks.append(String(format: "%.0f", elapsed.inSeconds * 1000))
                    }
                    if received == expected { break }
                }
                if debug { print("ours: ms at each tenth: \(marks.joined(separator: " "))") }
                return received
            }
            let consumeTime = ContinuousClock.now - consumeStart
            if ProcessInfo.processInfo.environment["KAFKA_BENCH_DEBUG"] != nil {
                print("ours: consumer paused for back-pressure \(consumer.backpressurePauseCount) times")
            }
            await consumer.shutdown()
            return (received, consumeTime)
        } catch {
            await consumer.shutdown()
            throw error
        }
    }

    /// How many messages the cluster holds for `topic` (Σ high − low over its partitions), and a
    /// warning if that is fewer than were produced.
    private func storedMessages(cluster: EmbeddedKafkaCluster, topic: String, logger: Logger) async throws -> Int {
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(kafka: KafkaConfiguration(bootstrapServers: [cluster.bootstrapServers]), mode: .manual),
            logger: logger
        )
        var stored: Int64 = 0
        do {
            for partition in 0..<Int32(partitions) {
                let watermarks = try await consumer.queryWatermarks(topic: topic, partition: partition)
                stored += watermarks.high - watermarks.low
            }
        } catch {
            await consumer.shutdown()
            throw error
        }
        await consumer.shutdown()
        if stored < messages {
            print("warning: \(topic) holds \(stored) of \(messages) messages (the mock cluster keeps ~5 MB per partition)")
        }
        return Int(stored)
    }

    /// Produces the file's `messages` lines with kcat (same properties); returns msg/s of the whole process.
    private func produceKcat(cluster: EmbeddedKafkaCluster, topic: String, file: URL) async throws -> Double {
        let properties = producerProperties.sorted { $0.key < $1.key }.flatMap { ["-X", "\($0.key)=\($0.value)"] }
        let time = try await timeProcess("kcat", ["-P", "-b", cluster.bootstrapServers, "-t", topic] + properties + ["-l", file.path])
        let rate = Double(messages) / time.inSeconds
        print(String(format: "kcat: producer %.0f msg/s (%.3f s)", rate, time.inSeconds))
        return rate
    }

    /// Reads the topic from the beginning to its end with kcat; returns msg/s of the whole process.
    private func consumeKcat(cluster: EmbeddedKafkaCluster, topic: String, logger: Logger) async throws -> Double {
        let stored = try await storedMessages(cluster: cluster, topic: topic, logger: logger)
        let time = try await timeProcess("kcat", ["-C", "-b", cluster.bootstrapServers, "-t", topic, "-o", "beginning", "-e", "-q"])
        let rate = Double(stored) / time.inSeconds
        print(String(format: "kcat: consumer %.0f msg/s (%d messages, %.3f s)", rate, stored, time.inSeconds))
        return rate
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

    /// Runs `body`; throws instead of waiting forever if it takes longer than `seconds`.
    private func withDeadline<T: Sendable>(_ what: String, seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                throw ValidationError("\(what) did not finish within \(seconds) s")
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
    }
}

