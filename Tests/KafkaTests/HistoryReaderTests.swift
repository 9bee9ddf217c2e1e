import CallpushTestSupport
import Foundation
import Locking
import Testing

@testable import Kafka

@Suite("History reader", .timeLimit(TestSupport.suiteTimeLimit))
struct HistoryReaderTests {
    static func reader(_ cluster: EmbeddedKafkaCluster) -> KafkaHistoryReader {
        var configuration = TestSupport.manualConsumerConfiguration(cluster)
        configuration.closeTimeout = .seconds(5)
        var reader = KafkaHistoryReader(configuration: configuration, logger: TestSupport.logger)
        reader.initialChunk = 300
        reader.maxChunk = 1_000
        return reader
    }

    static func records(_ topic: String, _ range: Range<Int>, partition: Int32, at: Date? = nil) -> [KafkaProducerRecord] {
        KafkaProducerRecord.numbered(topic: topic, range, partition: { _ in partition }, at: at)
    }

    @Test("newest first hands over every message of the window, newest first; oldest first in offset order; both complete")
    func ordersAndCompleteness() async throws {
        try await withCluster(brokers: 1) { cluster in
            // Partition 0: 100 messages older than the window, then 2,500 in it. Partition 1: empty.
            // Partition 2: 50 in the window.
            let topic = try await makeTopic("history", partitions: 3, on: cluster) { topic in
                Self.records(topic, 0..<100, partition: 0, at: Date().addingTimeInterval(-7200))
                    + Self.records(topic, 100..<2600, partition: 0) + Self.records(topic, 5000..<5050, partition: 2)
            }
            let reader = Self.reader(cluster)
            let since = Date().addingTimeInterval(-3600)

            var newest: [Int32: [Int]] = [:]
            let backward = await reader.read(topic: topic, partitions: [0, 1, 2], since: since, order: .newestFirst, bound: .seconds(60)) {
                newest[$0.partition, default: []].append($0.id ?? -1)
                return true
            }
            #expect(backward == [0: .complete, 1: .complete, 2: .complete])
            #expect(newest[0] == Array((100..<2600).reversed()), "partition 0: the window, newest first, each once")
            #expect(newest[1] == nil)
            #expect(newest[2] == Array((5000..<5050).reversed()))

            var oldest: [Int32: [Int]] = [:]
            let forward = await reader.read(topic: topic, partitions: [0, 1, 2], since: since, order: .oldestFirst, bound: .seconds(60)) {
                oldest[$0.partition, default: []].append($0.id ?? -1)
                return true
            }
            #expect(forward == [0: .complete, 1: .complete, 2: .complete])
            #expect(oldest[0] == Array(100..<2600))
            #expect(oldest[2] == Array(5000..<5050))
        }
    }

    @Test("a newest-first read that hits its bound covers the newest messages and says how far back it got")
    func boundedNewestFirstIsPartial() async throws {
        try await withCluster(brokers: 1) { cluster in
            let topic = try await makeTopic("history-slow", partitions: 1, on: cluster) { Self.records($0, 0..<8000, partition: 0) }
            // Every response takes 400 ms (scaled like the bound): 8,000 messages in chunks of 300
            // take about 35 s to read in full (measured), three times the bound, while the look-ups
            // and the first chunk take a few round trips: a loaded machine still covers the newest
            // chunk and never the whole range.
            try cluster.setBrokerRoundTripTime(1, TestTiming.scaled(.milliseconds(400)))
            var reader = Self.reader(cluster)
            reader.maxChunk = 300
            reader.lookupTimeout = TestTiming.scaled(.seconds(6))  // the look-ups take a few round trips too
            var read: [Int] = []
            let coverage = await reader.read(
                topic: topic, partitions: [0], since: Date().addingTimeInterval(-600), order: .newestFirst,
                bound: TestTiming.scaled(.seconds(12))
            ) {
                read.append($0.id ?? -1)
                return true
            }
            guard case .partial(let reached)? = coverage[0] else {
                Issue.record("expected a partial read, got \(String(describing: coverage[0])) after \(read.count) messages")
                return
            }
            #expect(reached != nil, "the newest chunks were covered")
            #expect(read.first == 7999, "the newest message came first")
            #expect(!read.contains(0), "the oldest message was left out")
            #expect(Array(read.prefix(300)) == Array((7700..<8000).reversed()), "the first chunk, newest first")
        }
    }

    /// A topic whose partition 0 holds 10 messages and whose partition 1 has no leader, and a
    /// reader whose look-ups give up after 2 s.
    static func withLeaderlessPartition(_ name: String, _ body: (KafkaHistoryReader, String) async throws -> Void) async throws {
        try await withCluster(brokers: 1) { cluster in
            let topic = try await makeTopic(name, partitions: 2, on: cluster) { Self.records($0, 0..<10, partition: 0) }
            try cluster.setPartitionLeader(topic: topic, partition: 1, broker: -1)
            var reader = Self.reader(cluster)
            reader.lookupTimeout = .seconds(2)
            try await body(reader, topic)
        }
    }

    static func expectFailed(_ coverage: KafkaHistoryReader.Coverage?, sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .failed? = coverage else {
            Issue.record("expected the partition to fail, got \(String(describing: coverage))", sourceLocation: sourceLocation)
            return
        }
    }

    @Test("a partition without a leader is failed, the others are read")
    func unreachablePartitionFails() async throws {
        try await Self.withLeaderlessPartition("history-down") { reader, topic in
            var read = 0
            let coverage = await reader.read(topic: topic, partitions: [0, 1], since: Date().addingTimeInterval(-600),
                                             order: .newestFirst, bound: .seconds(30)) { _ in
                read += 1
                return true
            }
            #expect(coverage[0] == .complete)
            #expect(read == 10)
            Self.expectFailed(coverage[1])
        }
    }

    @Test("oldest first with follow: the history, then new messages, until the handler stops")
    func followsNewMessages() async throws {
        try await withTopic("history-follow", partitions: 2, brokers: 1) { cluster, topic in
            try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
                try await producer.sendAll(Self.records(topic, 0..<5, partition: 0))
                // The new message is written once the history has been handed over, however long that takes.
                let (historyRead, historyReadSignal) = AsyncStream.makeStream(of: Void.self)
                let later = Task {
                    for await _ in historyRead { break }
                    try await producer.sendAll(Self.records(topic, 5..<6, partition: 1))
                }
                let ids = Locked<[Int]>([])
                let coverage = try await withTimeout("following", seconds: 30) { [reader = Self.reader(cluster)] in
                    await reader.read(topic: topic, partitions: [0, 1], since: Date().addingTimeInterval(-600),
                                      order: .oldestFirst, follow: true) { message in
                        ids.withLock { $0.append(message.id ?? -1) }
                        if message.id == 4 { historyReadSignal.yield() }
                        return message.id != 5
                    }
                }
                _ = try await later.value
                #expect(coverage == [0: .complete, 1: .complete])
                #expect(ids.withLock { $0 } == [0, 1, 2, 3, 4, 5])
            }
        }
    }

    @Test("several topics are read with one consumer, each partition's coverage keyed by topic")
    func readsSeveralTopics() async throws {
        try await withCluster(brokers: 1) { cluster in
            let requests = try await makeTopic("history-requests", partitions: 2, on: cluster) { topic in
                Self.records(topic, 0..<20, partition: 0) + Self.records(topic, 20..<30, partition: 1)
            }
            let statuses = try await makeTopic("history-statuses", partitions: 1, on: cluster) { Self.records($0, 100..<140, partition: 0) }
            let partitions = [KafkaTopicPartition(topic: requests, partition: 0), KafkaTopicPartition(topic: requests, partition: 1),
                              KafkaTopicPartition(topic: statuses, partition: 0)]
            let events = Locked<[String]>([])
            var read: [String: [Int]] = [:]
            let coverage = await Self.reader(cluster).read(
                partitions: partitions, since: Date().addingTimeInterval(-600), order: .oldestFirst, bound: .seconds(60),
                located: { failed in
                    events.withLock { $0.append("located \(failed.count) failed") }
                    return true
                }
            ) { message in
                events.withLock { $0.append("message") }
                read[message.topic, default: []].append(message.id ?? -1)
                return true
            }
            #expect(events.withLock { $0.first } == "located 0 failed", "located comes before any message")
            #expect(coverage == Dictionary(uniqueKeysWithValues: partitions.map { ($0, .complete) }))
            #expect(read[requests]?.sorted() == Array(0..<30))
            #expect(read[statuses] == Array(100..<140))
        }
    }

    @Test("located can stop a read whose partitions are not all found: nothing is handed over")
    func locatedStopsTheRead() async throws {
        try await Self.withLeaderlessPartition("history-located") { reader, topic in
            var unlocated: [Int32] = []
            var read = 0
            let coverage = await reader.read(
                topic: topic, partitions: [0, 1], since: Date().addingTimeInterval(-600), order: .oldestFirst, follow: true,
                located: { failed in
                    unlocated = failed.keys.sorted()
                    return failed.isEmpty
                }
            ) { _ in
                read += 1
                return true
            }
            #expect(unlocated == [1])
            #expect(read == 0)
            #expect(coverage[0] == .partial(reached: nil))
            Self.expectFailed(coverage[1])
        }
    }
}
