import CRdKafka
import Testing

@testable import Kafka

/// `startOffset(notBefore:)` falls back to the low watermark only when the broker says it
/// cannot look timestamps up; other lookup failures reach the caller.
@Suite("Start offset from a timestamp", .timeLimit(TestSupport.suiteTimeLimit))
struct StartOffsetTests {
    @Test("a broker answering UNSUPPORTED_FOR_MESSAGE_FORMAT makes startOffset read from the low watermark")
    func unsupportedFallsBack() async throws {
        try await withStoredMessages { cluster, consumer, topic in
            try cluster.pushRequestErrors(apiKey: .listOffsets, errors: ["UNSUPPORTED_FOR_MESSAGE_FORMAT"])
            let lookup = try await consumer.timestampLookup(topic: topic, partition: 0, 1_700_000_000_000, timeout: .seconds(10))
            #expect(lookup == .unsupported(RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT))

            // The two watermark requests succeed, the timestamp lookup is refused.
            try cluster.pushRequestErrors(apiKey: .listOffsets, errors: ["NO_ERROR", "NO_ERROR", "UNSUPPORTED_FOR_MESSAGE_FORMAT"])
            let start = try await consumer.startOffset(topic: topic, partition: 0, notBefore: 1_700_000_000_000)
            #expect(start == 0)
        }
    }

    @Test("any other timestamp-lookup error is thrown, not hidden by the fallback")
    func otherErrorsThrow() async throws {
        try await withStoredMessages { cluster, consumer, topic in
            try cluster.pushRequestErrors(apiKey: .listOffsets, errors: ["TOPIC_AUTHORIZATION_FAILED"])
            let lookupError = await #expect(throws: KafkaError.self) {
                _ = try await consumer.timestampLookup(topic: topic, partition: 0, 1_700_000_000_000, timeout: .seconds(10))
            }
            #expect(lookupError?.code == "TOPIC_AUTHORIZATION_FAILED")

            try cluster.pushRequestErrors(apiKey: .listOffsets, errors: ["NO_ERROR", "NO_ERROR", "TOPIC_AUTHORIZATION_FAILED"])
            let error = await #expect(throws: KafkaError.self) {
                _ = try await consumer.startOffset(topic: topic, partition: 0, notBefore: 1_700_000_000_000)
            }
            #expect(error?.code == "TOPIC_AUTHORIZATION_FAILED")
        }
    }

    @Test("the mock cluster's 'none for every timestamp' is detected and falls back to the low watermark")
    func mockWithoutLookup() async throws {
        try await withStoredMessages { _, consumer, topic in
            let lookup = try await consumer.timestampLookup(topic: topic, partition: 0, 0, timeout: .seconds(10))
            #expect(lookup == TimestampLookup.none, "the mock answers -1 even for timestamp 0")
            let start = try await consumer.startOffset(topic: topic, partition: 0, notBefore: 1_700_000_000_000)
            #expect(start == 0)
        }
    }

    /// A one-broker cluster with 5 messages in partition 0 of a fresh topic, and a manual consumer.
    private func withStoredMessages(
        _ body: (EmbeddedKafkaCluster, KafkaConsumer, String) async throws -> Void
    ) async throws {
        try await withTopic("times", partitions: 1, brokers: 1) { cluster, topic in
            try await produce((0..<5).map { KafkaProducerRecord.numbered(topic: topic, $0) }, on: cluster)
            try await withConsumer(TestSupport.manualConsumerConfiguration(cluster)) { consumer in
                // Connections and metadata first, so injected errors hit the requests under test.
                let watermarks = try await consumer.queryWatermarks(topic: topic, partition: 0)
                #expect(watermarks == KafkaWatermarks(low: 0, high: 5))
                try await body(cluster, consumer, topic)
            }
        }
    }
}
