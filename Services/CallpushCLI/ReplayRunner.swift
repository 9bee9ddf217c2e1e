import CallContract
import CallTracing
import Foundation
import Kafka
import Logging

/// The work of `callpush replay`: reads the DLQ from the replay group's committed position to
/// the end captured at start, publishes the selected rings to the requests topic with the
/// next replay generation, and commits the position after each publish is acknowledged —
/// so an interrupted run, started again, never publishes the same record twice.
struct ReplayRunner: Sendable {
    var kafka: ResolvedKafka
    var group: String
    var fromBeginning = false
    var dryRun = false
    var filter = ReplayFilter()
    var newDeadline: Duration?
    /// Records published per second at most.
    var rate: Double?
    /// Stop after publishing this many.
    var maxRecords: Int?
    /// How long reading may see no record before the run ends with a warning.
    var idleTimeout: Duration = .seconds(15)
    var logger: Logger
    var output: CommandOutput
    var interruption = Interruption()
    var clock: @Sendable () -> Date = { Date() }
    /// Traces each replay (a new trace linked to the replayed delivery's); off unless the `OTEL_*`
    /// variables configure an exporter.
    var tracing: CallTracing = .off

    /// The end of a run.
    struct Summary: Sendable, Hashable {
        var counts: ReplayCounts
        var interrupted: Bool
        /// Records of the range never seen (removed by retention while reading).
        var unseen: Int
    }

    func run() async throws -> Summary {
        let cluster = try await kafka.describeCluster(logger: logger)
        let dlq = kafka.topics.deadLetter
        let partitionCount = try ResolvedKafka.partitions(of: dlq, in: cluster, flag: "--topic-dlq")
        if !dryRun { _ = try ResolvedKafka.partitions(of: kafka.topics.requests, in: cluster, flag: "--topic-requests") }

        var consumerKafka = kafka.configuration
        consumerKafka.properties["group.id"] = group
        consumerKafka.properties["fetch.wait.max.ms"] = consumerKafka.properties["fetch.wait.max.ms"] ?? "100"
        let consumer: KafkaConsumer
        do {
            consumer = try KafkaConsumer(
                configuration: KafkaConsumerConfiguration(kafka: consumerKafka, mode: .manual, closeTimeout: .seconds(5)), logger: logger)
        } catch {
            throw CLIError.usage("Kafka configuration: \(error.message)")
        }
        var producer: KafkaProducer?
        do {
            if !dryRun {
                var configuration = KafkaProducerConfiguration(kafka: kafka.configuration)
                configuration.flushTimeout = .seconds(5)
                configuration.destroyTimeout = .seconds(5)
                producer = try KafkaProducer(configuration: configuration, logger: logger)
            }
            let summary = try await read(consumer: consumer, producer: producer, topic: dlq, partitions: partitionCount)
            await producer?.shutdown()
            await consumer.shutdown()
            return summary
        } catch {
            await producer?.shutdown()
            await consumer.shutdown()
            if let error = error as? KafkaError { throw CLIError.usage("Kafka configuration: \(error.message)") }
            throw error
        }
    }

    private func ranges(consumer: KafkaConsumer, topic: String, partitions: Int) async throws -> [Int32: Range<Int64>] {
        let all = (0..<Int32(partitions)).map { KafkaTopicPartition(topic: topic, partition: $0) }
        let committed: [KafkaTopicPartition: Int64?]
        do {
            committed = fromBeginning ? [:] : try await consumer.committedOffsets(all, timeout: kafka.connectTimeout)
        } catch {
            throw CLIError.kafka("reading the committed position of group \(group)", error)
        }
        var ranges: [Int32: Range<Int64>] = [:]
        for partition in all {
            let marks: KafkaWatermarks
            do {
                marks = try await consumer.queryWatermarks(topic: topic, partition: partition.partition, timeout: kafka.connectTimeout)
            } catch {
                throw CLIError.kafka("reading the end offsets of \(partition)", error)
            }
            let start = max(marks.low, (committed[partition] ?? nil) ?? marks.low)
            ranges[partition.partition] = start..<max(start, marks.high)
        }
        return ranges
    }

    private func read(consumer: KafkaConsumer, producer: KafkaProducer?, topic: String, partitions: Int) async throws -> Summary {
        let ranges = try await ranges(consumer: consumer, topic: topic, partitions: partitions)
        var counts = ReplayCounts()
        counts.total = ranges.values.reduce(0) { $0 + Int($1.count) }
        let active = ranges.filter { !$0.value.isEmpty }
        var progress = ReplayProgress(output: output, dryRun: dryRun)
        guard !active.isEmpty, !interruption.isRequested else {
            return Summary(counts: counts, interrupted: interruption.isRequested, unseen: 0)
        }
        do {
            try await consumer.assign(active.map { KafkaPartitionAssignment(topic: topic, partition: $0.key, start: .offset($0.value.lowerBound)) })
        } catch {
            throw CLIError.kafka("assigning \(topic)", error)
        }

        let gate = ReplayGate()
        let watchdog = Task { [idleTimeout, interruption] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(200))
                if interruption.isRequested || gate.idle(longerThan: idleTimeout) || gate.isStopping {
                    if gate.requestStop() {
                        await consumer.shutdown()
                        return
                    }
                }
            }
        }
        defer { watchdog.cancel() }

        var positions: [Int32: Int64] = [:]
        var committed: [Int32: Int64] = [:]
        var finished = Set<Int32>()
        var limiter = RateLimiter(perSecond: rate)
        var published = 0
        do {
            for try await message in consumer.messages {
                guard gate.begin() else { break }
                defer { gate.end() }
                guard let range = active[message.partition], range.contains(message.offset) else { continue }
                let verdict = ReplayDecision.decide(message, filter: filter, newDeadline: newDeadline, now: clock())
                counts.count(verdict)
                positions[message.partition] = message.offset + 1
                if case .replay(let ring, let rearmed) = verdict {
                    if let producer {
                        await limiter.wait()
                        try await publish(ring, producer: producer, requests: kafka.topics.requests,
                                          original: TraceParent(kafkaHeaders: message.headers))
                        try await commit(consumer, topic: topic, [message.partition: message.offset + 1])
                        committed[message.partition] = message.offset + 1
                    }
                    output.line(Self.describe(ring, record: message, rearmed: rearmed, dryRun: dryRun))
                    published += 1
                }
                progress.update(counts)
                if message.offset + 1 >= range.upperBound { finished.insert(message.partition) }
                if finished.count == active.count || interruption.isRequested { break }
                if let maxRecords, published >= maxRecords { break }
            }
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("kafka-error", "reading \(topic): \(error)")
        }
        _ = gate.requestStop()
        // Skipped records after the last publish: move the position past them too.
        let pending = positions.filter { committed[$0.key] != $0.value }
        if producer != nil, !pending.isEmpty {
            try? await commit(consumer, topic: topic, pending)
        }
        progress.finish(counts)
        let seen = positions.reduce(0) { $0 + Int($1.value - (active[$1.key]?.lowerBound ?? $1.value)) }
        let stoppedEarly = interruption.isRequested || (maxRecords.map { published >= $0 } ?? false)
        let unseen = stoppedEarly ? 0 : max(0, counts.total - seen)
        return Summary(counts: counts, interrupted: interruption.isRequested, unseen: unseen)
    }

    /// Publishes a replayed ring. It starts a new trace — a replay is a new delivery, often days
    /// after the first, and a parent link would stretch the original trace over that time and
    /// inherit its sampling decision — and keeps the link to the original one: the record carries
    /// the dead letter's `traceparent` in `callpush-trace-link` (the worker links its span to it,
    /// whether or not this command traces), and, when it traces, its own `replay dead letter` span
    /// is linked to it and is the record's `traceparent`.
    private func publish(_ ring: RingRequest, producer: KafkaProducer, requests: String, original: TraceParent?) async throws {
        let value: Data
        do {
            value = try CallRequest.ring(ring).encoded()
        } catch {
            throw CLIError("encode", "cannot encode call \(ring.callId): \(error)")
        }
        var headers: [KafkaHeader] = []
        if let original { headers.append(KafkaHeader(key: SpanName.linkHeader, string: original.traceparent)) }
        let span = tracing.startSpan(SpanName.replay, parent: nil, kind: .producer)
        if let span {
            tracing.link(span, to: original)
            span.attributes[SpanAttributeName.callID] = ring.callId
            span.attributes[SpanAttributeName.app] = ring.app
            span.attributes[SpanAttributeName.tenant] = ring.tenant
            span.attributes[SpanAttributeName.deviceKey] = DeviceKey.make(token: ring.device.token)
            span.attributes[SpanAttributeName.replay] = ring.replay
            headers += tracing.traceParent(of: span.context)?.kafkaHeaders ?? []
        }
        defer { span?.end() }
        do {
            try await producer.send(KafkaProducerRecord(topic: requests, key: Array(ring.callId.utf8), value: Array(value), headers: headers))
        } catch {
            span?.fail("not published")
            throw CLIError.kafka("publishing call \(ring.callId) to \(requests) (the replay position stays before it)", error)
        }
    }

    private func commit(_ consumer: KafkaConsumer, topic: String, _ offsets: [Int32: Int64]) async throws {
        var list: [KafkaTopicPartition: Int64] = [:]
        for (partition, offset) in offsets { list[KafkaTopicPartition(topic: topic, partition: partition)] = offset }
        do {
            try await consumer.commit(list)
        } catch {
            throw CLIError.kafka("committing the replay position of group \(group) (the last record was published; "
                                 + "a re-run may publish it again, the worker then answers duplicate)", error)
        }
    }

    /// One line per replayed (or, with `--dry-run`, selected) record; never the device token.
    static func describe(_ ring: RingRequest, record: KafkaConsumerMessage, rearmed: Bool, dryRun: Bool) -> String {
        let error = record.header(DeadLetterHeader.error)?.stringValue ?? "-"
        let failedAt = record.header(DeadLetterHeader.failedAt)?.stringValue ?? "-"
        return [dryRun ? "would replay" : "replayed", ring.callId, "app=\(ring.app)",
                "device=\(DeviceKey.make(token: ring.device.token).prefix(12))", "error=\(error)", "failed-at=\(failedAt)",
                "replay=\(ring.replay)", rearmed ? "re-armed until \(ContractCoding.format(ring.ringDeadline))" : ""]
            .filter { !$0.isEmpty }.joined(separator: "  ")
    }
}
