import Foundation
import Locking
import Testing

@testable import Kafka

/// Every record a producer reports delivered is in the log, through the faults the campaign
/// injects at dispatch's producer: a partition leader's broker down for longer than the delivery
/// timeout, partition leaders moving, a slow broker.
extension Range where Bound == Int32 {
    func asyncSum(_ value: (Int32) async throws -> Int64) async rethrows -> Int {
        var sum: Int64 = 0
        for element in self { sum += try await value(element) }
        return Int(sum)
    }
}

@Suite("Publishing through broker faults", .timeLimit(TestSupport.suiteTimeLimit))
struct FaultedPublishTests {
    @Test("every record acknowledged with an offset through a broker outage longer than the delivery timeout is stored")
    func outageLongerThanDeliveryTimeout() async throws {
        try await withTopic("outage", partitions: 6) { cluster, topic in
            for partition in 0..<Int32(6) { try cluster.setPartitionLeader(topic: topic, partition: partition, broker: partition % 3 + 1) }
            var configuration = TestSupport.producerConfiguration(cluster)
            configuration.deliveryTimeout = .seconds(3)
            configuration.queueFullTimeout = .seconds(3)
            configuration.linger = .milliseconds(1)
            let delivered = Locked<Set<Int>>([])
            let failed = Locked(0)
            try await withProducer(configuration) { producer in
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    for sender in 0..<20 {
                        tasks.addTask {
                            for round in 0..<120 {
                                let number = round * 20 + sender
                                var record = KafkaProducerRecord.numbered(topic: topic, number, key: "k\(number)")
                                record.partition = Int32(number % 6)
                                let results = try await producer.send([record])
                                switch results[0] {
                                case .success(let report) where report.offset >= 0: _ = delivered.withLock { $0.insert(number) }
                                // Acknowledged implicitly (no offset): a broker that checks idempotent
                                // sequence numbers stored it; the embedded cluster may not have (docs/kafka.md).
                                case .success: break
                                case .failure: failed.withLock { $0 += 1 }
                                }
                                try await Task.sleep(for: .milliseconds(100))
                            }
                        }
                    }
                    try await Task.sleep(for: .seconds(2))
                    try cluster.setBrokerDown(1)
                    try await Task.sleep(for: .milliseconds(4800))
                    try cluster.setBrokerUp(1)
                    try await Task.sleep(for: .seconds(1))
                    for partition in 0..<Int32(6) { try cluster.setPartitionLeader(topic: topic, partition: partition, broker: (partition % 3 + 1) % 3 + 1) }
                    try await Task.sleep(for: .milliseconds(4800))
                    for partition in 0..<Int32(6) { try cluster.setPartitionLeader(topic: topic, partition: partition, broker: partition % 3 + 1) }
                    try cluster.setBrokerRoundTripTime(2, .milliseconds(300))
                    try await Task.sleep(for: .milliseconds(4800))
                    try cluster.setBrokerRoundTripTime(2, .zero)
                    try await tasks.waitForAll()
                }
            }
            let consumer = try KafkaConsumer(configuration: TestSupport.manualConsumerConfiguration(cluster), logger: TestSupport.logger)
            try await consumer.assign(KafkaPartitionAssignment.fromBeginning(topic, partitions: 6))
            let want = delivered.withLock { $0 }
            let received = try? await consume(consumer, seconds: 15) { Set($0.compactMap(\.id)).isSuperset(of: want) }
            await consumer.shutdown()
            var stored = Set((received ?? []).compactMap(\.id))
            if received == nil {
                // Read everything there is (the wait above ended on its bound): what is missing is lost.
                let again = try KafkaConsumer(configuration: TestSupport.manualConsumerConfiguration(cluster), logger: TestSupport.logger)
                try await again.assign(KafkaPartitionAssignment.fromBeginning(topic, partitions: 6))
                let count = try await (0..<Int32(6)).asyncSum { try await again.queryWatermarks(topic: topic, partition: $0, timeout: .seconds(5)).high }
                stored = Set(try await consume(again, seconds: 15) { $0.count >= count }.compactMap(\.id))
                await again.shutdown()
            }
            let failures = failed.withLock { $0 }
            #expect(failures > 0, "the outage outlasted the delivery timeout, so some records failed")
            #expect(want.subtracting(stored).isEmpty,
                    "reported delivered but not stored: \(want.subtracting(stored).sorted().prefix(10)) (\(want.count) delivered, \(failures) failed)")
        }
    }
}
