import Foundation
import Logging

/// Reads the recent history of a topic's partitions (or of several topics' at once): the messages
/// from a point in time to the end each partition had when the read began, oldest first or newest
/// first, within a bound, and says per partition how much of that it covered. The one reader of
/// "now − window to the end" for the worker's dedupe rebuild, `callpush status` and dispatch's
/// status view.
///
/// - Oldest first: each partition from its first message at or after `since`
///   (``KafkaConsumer/startOffset(topic:partition:notBefore:timeout:)``) to its end, in offset
///   order; with `follow` it goes on with new messages until the handler stops it, the bound passes
///   or the task is cancelled.
/// - Newest first: each partition walked back from its end in chunks (``initialChunk`` messages,
///   doubling up to ``maxChunk``; each chunk is handed over newest message first) until a chunk
///   reaches a message older than `since` or the start offset. A read that runs out of time leaves
///   out the oldest messages, never the newest.
///
/// Messages older than `since` (by timestamp) are skipped: timestamps need not grow with offsets,
/// and a broker without timestamp look-up (librdkafka's mock cluster) starts at the low watermark.
/// A partition's end is the offset after its last message: partitions written only by
/// non-transactional producers (no control records), which is what callpush's topics are.
///
/// Each read uses its own manual-mode consumer; it is closed in the background when the read
/// returns (bounded by ``KafkaConsumerConfiguration/closeTimeout``), so a read returns at its bound
/// even when closing the consumer is slow (librdkafka 2.0.2's destroy can hang after a broker
/// restart).
public struct KafkaHistoryReader: Sendable {
    /// The order in which each partition's messages are handed over.
    public enum Order: Sendable, Hashable {
        case oldestFirst
        case newestFirst
    }

    /// How much of a partition's history a read handed over.
    public enum Coverage: Sendable, Hashable {
        /// Every message from `since` to the partition's end (an empty range included).
        case complete
        /// The read stopped (bound, handler, cancellation) before covering the range. `reached`:
        /// the timestamp of the last message of the part covered without a gap, counted from where
        /// the read began (newest first: how far back it got; oldest first: how far forward);
        /// `nil` if it handed over nothing.
        case partial(reached: Date?)
        /// The partition's range could not be located (e.g. no leader within the look-up bound)
        /// or read.
        case failed(KafkaError)
    }

    /// The consumer's configuration (its mode is set to manual).
    public var configuration: KafkaConsumerConfiguration
    public var logger: Logger
    /// The bound of each partition's offset look-ups (within the read's bound); a look-up that
    /// fails (no leader, a broker unreachable) is asked again until then. Default 5 s.
    public var lookupTimeout: Duration = .seconds(5)
    /// The pause before a failed look-up is asked again.
    static let lookupRetryPause = Duration.milliseconds(250)
    /// Newest first: the size of each partition's first chunk. Small, so the newest messages come
    /// first and fast. Default 1,000.
    public var initialChunk = 1_000
    /// Newest first: the largest chunk (messages per partition held at once). Default 8,000.
    public var maxChunk = 8_000

    /// Creates a reader whose consumers use `configuration` (in manual mode).
    public init(configuration: KafkaConsumerConfiguration, logger: Logger) {
        self.configuration = configuration
        self.configuration.mode = .manual
        self.logger = logger
    }

    /// Reads `partitions` of one `topic`, as ``read(partitions:since:order:bound:follow:located:_:)``
    /// does, with the partitions named by number.
    public func read(
        topic: String, partitions: [Int32], since: Date, order: Order, bound: Duration? = nil, follow: Bool = false,
        located: ([Int32: KafkaError]) -> Bool = { _ in true }, _ handle: (KafkaConsumerMessage) -> Bool
    ) async -> [Int32: Coverage] {
        let coverage = await read(
            partitions: partitions.map { KafkaTopicPartition(topic: topic, partition: $0) }, since: since, order: order,
            bound: bound, follow: follow,
            located: { failed in located(Dictionary(uniqueKeysWithValues: failed.map { ($0.key.partition, $0.value) })) },
            handle
        )
        return Dictionary(uniqueKeysWithValues: coverage.map { ($0.key.partition, $0.value) })
    }

    /// Reads `partitions` (of one topic or several, with one consumer) from `since` to their ends
    /// and hands each message to `handle` (which returns `false` to stop the read), in `order`.
    ///
    /// - Parameters:
    ///   - bound: the longest the read may take, look-ups included (`nil`: no bound).
    ///   - follow: oldest first only: after the ends, keep handing over new messages.
    ///   - located: called once every partition's range was looked up, before any message is
    ///     handed over, with the partitions that could not be located; returns `false` to stop.
    /// - Returns: the coverage of every partition asked for.
    public func read(
        partitions: [KafkaTopicPartition],
        since: Date,
        order: Order,
        bound: Duration? = nil,
        follow: Bool = false,
        located: ([KafkaTopicPartition: KafkaError]) -> Bool = { _ in true },
        _ handle: (KafkaConsumerMessage) -> Bool
    ) async -> [KafkaTopicPartition: Coverage] {
        let partitions = Array(Set(partitions)).sorted(by: Self.precedes)
        guard !partitions.isEmpty else { return [:] }
        let consumer: KafkaConsumer
        do {
            consumer = try KafkaConsumer(configuration: configuration, logger: logger)
        } catch {
            return Dictionary(uniqueKeysWithValues: partitions.map { ($0, .failed(error)) })
        }
        let deadline = bound.map { ContinuousClock.now + $0 }
        // At the bound the consumer is shut down, which ends the message sequence being read.
        let timer = deadline.map { deadline in
            Task {
                try? await Task.sleep(until: deadline)
                if !Task.isCancelled { await consumer.shutdown() }
            }
        }
        defer {
            timer?.cancel()
            Task { await consumer.shutdown() }
        }

        let sinceMs = Int64((since.timeIntervalSince1970 * 1000).rounded(.down))
        var progress = await locate(consumer, partitions: partitions, sinceMs: sinceMs, deadline: deadline)
        guard located(progress.failed) else { return progress.coverage }
        switch order {
        case .oldestFirst:
            await readForward(consumer, progress: &progress, sinceMs: sinceMs, follow: follow, handle)
        case .newestFirst:
            await readBackward(consumer, progress: &progress, sinceMs: sinceMs, handle)
        }
        return progress.coverage
    }

    /// Topic, then partition number.
    static func precedes(_ a: KafkaTopicPartition, _ b: KafkaTopicPartition) -> Bool {
        a.topic == b.topic ? a.partition < b.partition : a.topic < b.topic
    }

    // MARK: locating

    /// What a read knows about each partition: its range and how far it got.
    struct Progress {
        struct Span {
            /// The first offset in the window (inclusive).
            var lower: Int64
            /// The partition's end when the read began (exclusive).
            var end: Int64
            /// Newest first: the offsets still to read are `lower..<next`. Oldest first: `next..<end`.
            var next: Int64
            var reached: Date?
            var done = false
        }
        var spans: [KafkaTopicPartition: Span] = [:]
        var failed: [KafkaTopicPartition: KafkaError] = [:]

        var active: [KafkaTopicPartition] { spans.filter { !$0.value.done }.keys.sorted(by: KafkaHistoryReader.precedes) }

        var coverage: [KafkaTopicPartition: Coverage] {
            var result: [KafkaTopicPartition: Coverage] = failed.mapValues { .failed($0) }
            for (partition, span) in spans {
                result[partition] = span.done ? .complete : .partial(reached: span.reached)
            }
            return result
        }
    }

    private func locate(
        _ consumer: KafkaConsumer, partitions: [KafkaTopicPartition], sinceMs: Int64, deadline: ContinuousClock.Instant?
    ) async -> Progress {
        let lookupTimeout = self.lookupTimeout
        func timeout() -> Duration {
            guard let deadline else { return lookupTimeout }
            return max(.milliseconds(1), min(lookupTimeout, deadline - .now))
        }
        var progress = Progress()
        await withTaskGroup(of: (KafkaTopicPartition, Result<(lower: Int64, end: Int64), KafkaError>).self) { group in
            for partition in partitions {
                let bound = timeout()
                group.addTask {
                    // librdkafka answers at once when the partition has no leader right now (a broker
                    // failing over): ask again until the bound rather than give the partition up.
                    let lookupEnd = ContinuousClock.now + bound
                    while true {
                        do throws(KafkaError) {
                            let left = max(.milliseconds(1), lookupEnd - .now)
                            let marks = try await consumer.queryWatermarks(topic: partition.topic, partition: partition.partition, timeout: left)
                            guard marks.low < marks.high else { return (partition, .success((marks.high, marks.high))) }
                            let start = try await consumer.startOffset(
                                topic: partition.topic, partition: partition.partition, notBefore: sinceMs, timeout: left)
                            return (partition, .success((min(max(start, marks.low), marks.high), marks.high)))
                        } catch {
                            guard error.code != .shutdown, ContinuousClock.now + Self.lookupRetryPause < lookupEnd else {
                                return (partition, .failure(error))
                            }
                            try? await Task.sleep(for: Self.lookupRetryPause)
                        }
                    }
                }
            }
            for await (partition, result) in group {
                switch result {
                case .success(let range):
                    progress.spans[partition] = Progress.Span(lower: range.lower, end: range.end, next: range.end)
                case .failure(let error):
                    logger.warning("cannot locate a partition's history", metadata: [
                        "kafka.topic": "\(partition.topic)", "kafka.partition": "\(partition.partition)", "kafka.error": "\(error)",
                    ])
                    progress.failed[partition] = error
                }
            }
        }
        return progress
    }

    // MARK: oldest first

    private func readForward(
        _ consumer: KafkaConsumer, progress: inout Progress, sinceMs: Int64, follow: Bool,
        _ handle: (KafkaConsumerMessage) -> Bool
    ) async {
        for (partition, range) in progress.spans {
            progress.spans[partition]?.next = range.lower
            if range.lower >= range.end { progress.spans[partition]?.done = true }
        }
        // Following, empty partitions are read too: their new messages count.
        let assigned = follow ? progress.spans.keys.sorted(by: Self.precedes) : progress.active
        guard !assigned.isEmpty else { return }
        do {
            try await consumer.assign(assigned.compactMap { partition in
                progress.spans[partition].map {
                    KafkaPartitionAssignment(topic: partition.topic, partition: partition.partition, start: .offset($0.lower))
                }
            })
            var remaining = progress.active.count
            for try await message in consumer.messages {
                let partition = KafkaTopicPartition(topic: message.topic, partition: message.partition)
                guard var range = progress.spans[partition], message.offset >= range.next,
                      follow || message.offset < range.end else { continue }
                range.next = message.offset + 1
                let inWindow = message.timestampMilliseconds.map { $0 >= sinceMs } ?? true
                let keepGoing = !inWindow || handle(message)
                if inWindow { range.reached = message.timestamp ?? range.reached }
                if !range.done, range.next >= range.end {
                    range.done = true
                    remaining -= 1
                }
                progress.spans[partition] = range
                if !keepGoing || (!follow && remaining == 0) { return }
            }
        } catch {
            interrupted(error, partitions: Array(progress.spans.keys))
        }
    }

    // MARK: newest first

    private func readBackward(
        _ consumer: KafkaConsumer, progress: inout Progress, sinceMs: Int64,
        _ handle: (KafkaConsumerMessage) -> Bool
    ) async {
        for (partition, range) in progress.spans where range.lower >= range.end {
            progress.spans[partition]?.done = true
        }
        var chunk = max(1, initialChunk)
        var iterator = consumer.messages.makeAsyncIterator()
        while !progress.active.isEmpty {
            let active = progress.active
            var starts: [KafkaTopicPartition: Int64] = [:]
            for partition in active {
                guard let range = progress.spans[partition] else { continue }
                starts[partition] = max(range.lower, range.next - Int64(chunk))
            }
            var collected: [KafkaTopicPartition: [KafkaConsumerMessage]] = [:]
            var open = Set(active)
            var stopped = false
            do {
                try await consumer.assign(active.compactMap { partition in
                    starts[partition].map { KafkaPartitionAssignment(topic: partition.topic, partition: partition.partition, start: .offset($0)) }
                })
                while !open.isEmpty, let message = try await iterator.next() {
                    let partition = KafkaTopicPartition(topic: message.topic, partition: message.partition)
                    guard let range = progress.spans[partition], let start = starts[partition],
                          open.contains(partition), message.offset >= start else { continue }
                    if message.offset < range.next { collected[partition, default: []].append(message) }
                    if message.offset >= range.next - 1 { open.remove(partition) }
                }
                if !open.isEmpty { stopped = true }  // the sequence ended: shut down at the bound
            } catch {
                interrupted(error, partitions: active)
                stopped = true
            }
            // Hand over newest first. A chunk read to its end extends the covered range back to its
            // start; the part of an interrupted chunk is handed over too, but covers nothing (a gap).
            for partition in active {
                guard var range = progress.spans[partition], let start = starts[partition] else { continue }
                let complete = !open.contains(partition)
                var crossedWindow = false
                var oldest: Date?
                for message in (collected[partition] ?? []).reversed() {
                    if let timestamp = message.timestampMilliseconds, timestamp < sinceMs {
                        crossedWindow = true
                        continue
                    }
                    oldest = message.timestamp ?? oldest
                    if !handle(message) {
                        progress.spans[partition] = range
                        return
                    }
                }
                if complete {
                    range.next = start
                    if let oldest { range.reached = oldest }
                    if crossedWindow || start <= range.lower { range.done = true }
                }
                progress.spans[partition] = range
            }
            if stopped { return }
            chunk = min(chunk * 2, max(chunk, maxChunk))
        }
    }

    private func interrupted(_ error: any Error, partitions: [KafkaTopicPartition]) {
        guard !(error is CancellationError) else { return }
        if let error = error as? KafkaError, error.code == .shutdown { return }  // the bound passed
        let topics = Set(partitions.map(\.topic)).sorted().joined(separator: ",")
        logger.warning("reading a topic's history failed", metadata: ["kafka.topic": "\(topics)", "kafka.error": "\(error)"])
    }
}
