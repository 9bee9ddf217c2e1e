import CallContract
import CallpushTestSupport
import Foundation
import Kafka
import Testing
@testable import PushWorker

/// The dedupe rebuild reads the status partitions newest first, so a rebuild that runs out of time
/// leaves out the oldest statuses, never the newest (review H4).
@Suite(.serialized) struct StatusHistoryReaderTests {
    static let topic = "status-rebuild"
    static let callK = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"

    static func status(_ callId: String, _ state: CallStatus.State, deviceKey: String? = "k-device", at: Date = Date()) -> CallStatus {
        CallStatus(callId: callId, deviceId: nil, deviceKey: deviceKey, app: "rider", state: state, attempt: 1, replay: 0,
                   at: at, worker: "w-old")
    }

    static func records(_ statuses: [CallStatus], partition: Int32) throws -> [KafkaProducerRecord] {
        try statuses.map { status in
            KafkaProducerRecord(topic: topic, partition: partition, key: Array(status.callId.utf8), value: Array(try status.encoded()))
        }
    }

    /// Small fetches: an oldest-first read of 12,000 statuses takes many round trips.
    static func kafka(_ cluster: EmbeddedKafkaCluster) -> KafkaConfiguration {
        var kafka = WorkerTestbed.kafka(cluster, "rebuild")
        kafka.properties["max.partition.fetch.bytes"] = "65536"
        return kafka
    }

    @Test func aRebuildOutOfTimeStillKnowsTheNewestStatus() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: WorkerTestbed.quietLogger)
        try cluster.createTopic(Self.topic, partitions: 2)
        let kafka = Self.kafka(cluster)
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(kafka: kafka), logger: WorkerTestbed.quietLogger)
        // 20,000 `failed` statuses of other calls over two partitions (each under the embedded
        // cluster's ~13k retention), then one `sent` for call K in partition 0.
        for (partition, count) in [(Int32(0), 12_000), (1, 8_000)] {
            let others = (0..<count).map { Self.status(UUID().uuidString.lowercased(), .failed, deviceKey: "k-\($0)") }
            for chunk in stride(from: 0, to: others.count, by: 2_000) {
                _ = try await producer.send(Self.records(Array(others[chunk..<min(chunk + 2_000, others.count)]), partition: partition))
                    .map { try $0.get() }
            }
        }
        try await producer.send(Self.records([Self.status(Self.callK, .sent)], partition: 0)[0])
        await producer.shutdown()
        // Every response takes 300 ms from now on, scaled like the bound: the whole history takes
        // about twice the bound to read, on any machine and under ThreadSanitizer.
        try cluster.setBrokerRoundTripTime(1, TestTiming.scaled(.milliseconds(300)))

        var reader = StatusHistoryReader(kafka: kafka, statusTopic: Self.topic, window: .seconds(600),
                                         timeout: TestTiming.scaled(.seconds(6)), logger: WorkerTestbed.quietLogger)
        reader.initialChunk = 500
        reader.maxChunk = 1_000
        var handled: [Int32: Set<DeliveryKey>] = [:]
        let coverage = await reader.rebuild(partitions: [0, 1], now: Date(), handled: { partition, key, _ in
            handled[partition, default: []].insert(key)
        }, cancelled: { _, _, _ in })
        #expect(handled[0]?.contains(DeliveryKey(callId: Self.callK, deviceKey: "k-device", replay: 0)) == true,
                "K's sent status, the newest, is known")
        guard case .partial(let reachedBack)? = coverage[0] else {
            Issue.record("a rebuild that ran out of time must say so: \(String(describing: coverage[0]))")
            await cluster.shutdown()
            return
        }
        #expect(reachedBack != nil)
        #expect((handled[0]?.count ?? 0) < 12_001, "the oldest statuses were left out")
        await cluster.shutdown()
    }

    @Test func anEmptyPartitionIsCompleteAndAnUnreachableOneFailed() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: WorkerTestbed.quietLogger)
        try cluster.createTopic(Self.topic, partitions: 3)
        let kafka = WorkerTestbed.kafka(cluster, "rebuild")
        let cancelledCall = "2c5f39cb-3fb2-4e4c-b4f6-f02ac6b8744c"
        let history = [
            Self.status(Self.callK, .sent),
            Self.status(Self.callK, .retrying, deviceKey: "k-other"),
            Self.status(cancelledCall, .cancelled, deviceKey: nil),
            Self.status(cancelledCall, .sent, deviceKey: "k-old", at: Date().addingTimeInterval(-3600)),
        ]
        try await storeRecords(Self.records(history, partition: 2), producer: KafkaProducerConfiguration(kafka: kafka),
                               logger: WorkerTestbed.quietLogger)
        try cluster.setPartitionLeader(topic: Self.topic, partition: 1, broker: -1)

        let reader = StatusHistoryReader(kafka: kafka, statusTopic: Self.topic, window: .seconds(600),
                                         timeout: TestTiming.scaled(.seconds(12)), logger: WorkerTestbed.quietLogger)
        var handled: [(Int32, DeliveryKey, Date)] = []
        var cancels: [(Int32, String, Date)] = []
        let now = Date()
        let coverage = await reader.rebuild(partitions: [0, 1, 2], now: now, handled: { handled.append(($0, $1, $2)) },
                                            cancelled: { cancels.append(($0, $1, $2)) })
        #expect(coverage[0] == .complete, "an empty partition is complete")
        #expect(coverage[2] == .complete)
        guard case .failed(let reason)? = coverage[1] else {
            Issue.record("a partition without a leader must fail: \(String(describing: coverage[1]))")
            await cluster.shutdown()
            return
        }
        #expect(!reason.isEmpty)
        #expect(handled.map(\.1) == [DeliveryKey(callId: Self.callK, deviceKey: "k-device", replay: 0)],
                "sent is handled; retrying is not; a status older than the window is skipped")
        #expect(handled.allSatisfy { $0.0 == 2 && $0.2 > now.addingTimeInterval(590) }, "remembered for the window")
        #expect(cancels.map(\.1) == [cancelledCall] && cancels.allSatisfy { $0.0 == 2 }, "the call-level cancel marker")
        await cluster.shutdown()
    }

    /// The status partition's leader is away while partitions move (a broker failing over): the
    /// rebuild waits for it within its bound. Giving up at once left the partition's dedupe state
    /// empty, and its new owner pushed every redelivered event again (seen in the fault campaign's
    /// slow-assignment fault).
    @Test func aRebuildWaitsForAStatusLeaderThatComesBackWithinItsBound() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: WorkerTestbed.quietLogger)
        try cluster.createTopic(Self.topic, partitions: 2)
        let kafka = WorkerTestbed.kafka(cluster, "rebuild")
        try await storeRecords(Self.records([Self.status(Self.callK, .sent)], partition: 1), producer: KafkaProducerConfiguration(kafka: kafka),
                               logger: WorkerTestbed.quietLogger)
        try cluster.setPartitionLeader(topic: Self.topic, partition: 1, broker: -1)
        let leaderBack = Task {
            try await Task.sleep(for: .seconds(2))
            try cluster.setPartitionLeader(topic: Self.topic, partition: 1, broker: 1)
        }

        let reader = StatusHistoryReader(kafka: kafka, statusTopic: Self.topic, window: .seconds(600),
                                         timeout: TestTiming.scaled(.seconds(15)), logger: WorkerTestbed.quietLogger)
        var handled: Set<DeliveryKey> = []
        let coverage = await reader.rebuild(partitions: [0, 1], now: Date(), handled: { _, key, _ in handled.insert(key) },
                                            cancelled: { _, _, _ in })
        try await leaderBack.value
        #expect(coverage[1] == .complete, "the leader came back within the bound: \(String(describing: coverage[1]))")
        #expect(handled.contains(DeliveryKey(callId: Self.callK, deviceKey: "k-device", replay: 0)))
        await cluster.shutdown()
    }
}
