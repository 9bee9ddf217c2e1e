import CallpushTestSupport
import Testing

@testable import Kafka

@Suite("Produce and consume", .timeLimit(TestSupport.suiteTimeLimit))
struct ProduceConsumeTests {
    @Test("keys, headers and per-partition order survive produce → consume across clients")
    func keysHeadersAndOrder() async throws {
        try await withTopic("orders", partitions: 3) { cluster, topic in
            let count = 3000
            let keys = (0..<30).map { "call-\($0)" }
            let records = (0..<count).map { number in
                KafkaProducerRecord(
                    topic: topic,
                    key: Array(keys[number % keys.count].utf8),
                    value: Array("payload-\(number)".utf8),
                    headers: [
                        KafkaHeader(key: "id", string: "\(number)"),
                        KafkaHeader(key: "empty", value: nil),
                        KafkaHeader(key: "bin", value: [0, 255, 7]),
                    ]
                )
            }
            let reports = try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
                try await withTimeout("producing", seconds: 30) {
                    try await producer.send(records).map { try $0.get() }
                }
            }
            #expect(reports.count == count)
            #expect(Set(reports.map(\.partition)) == [0, 1, 2])

            let consumer = try KafkaConsumer(
                configuration: TestSupport.consumerConfiguration(cluster, group: TestSupport.unique("g"), topics: [topic]),
                logger: TestSupport.logger
            )
            let received = try await consume(consumer, seconds: 40) { $0.count >= count }
            await consumer.shutdown()

            #expect(received.count == count)
            // Every message arrives once, with its key, value and headers intact.
            #expect(Set(received.compactMap(\.id)) == Set(0..<count))
            for message in received {
                let number = try #require(message.id)
                #expect(message.keyString == keys[number % keys.count])
                #expect(message.valueString == "payload-\(number)")
                #expect(message.headers.map(\.key) == ["id", "empty", "bin"])
                #expect(message.header("empty")?.value == nil)
                #expect(message.header("bin")?.value == [0, 255, 7])
                #expect(message.timestampMilliseconds != nil)
            }
            // Per partition: offsets strictly increasing, and each key's messages in send order.
            for partition in Int32(0)..<3 {
                let inPartition = received.filter { $0.partition == partition }
                #expect(inPartition.map(\.offset) == inPartition.map(\.offset).sorted())
                #expect(Set(inPartition.map(\.offset)).count == inPartition.count)
                var lastByKey: [String: Int] = [:]
                for message in inPartition {
                    let key = try #require(message.keyString)
                    let number = try #require(message.id)
                    #expect(number > lastByKey[key, default: -1], "key \(key) out of order")
                    lastByKey[key] = number
                }
            }
            // Delivery reports match where the messages were read.
            let reportedOffsets = Set(reports.map { "\($0.partition)/\($0.offset)" })
            #expect(reportedOffsets == Set(received.map { "\($0.partition)/\($0.offset)" }))
        }
    }
}
