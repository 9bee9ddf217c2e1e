import CRdKafka
import CallpushTestSupport
import Foundation
import Locking
import Testing

@testable import Kafka

/// Fatal producer errors are repaired by the producer itself; per-record errors say what to do.
@Suite("Producer recovery and error dispositions", .timeLimit(TestSupport.suiteTimeLimit))
struct ProducerRecoveryTests {
    /// Sends `record` until it is acknowledged, collecting the errors on the way.
    static func sendUntilAcknowledged(
        _ producer: KafkaProducer, _ record: KafkaProducerRecord, errors: Locked<[KafkaError]>
    ) async throws -> KafkaDeliveryReport {
        try await withTimeout("a send succeeding", seconds: 40) {
            while true {
                do throws(KafkaError) {
                    return try await producer.send(record)
                } catch {
                    errors.withLock { $0.append(error) }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
        }
    }

    @Test("CLUSTER_AUTHORIZATION_FAILED on InitProducerId is fatal: the producer replaces its client and later sends succeed")
    func fatalInitProducerIDIsRepaired() async throws {
        try await withTopic("fatal-pid", partitions: 1, brokers: 1) { cluster, topic in
            try cluster.pushRequestErrors(apiKey: .initProducerID, errors: ["CLUSTER_AUTHORIZATION_FAILED"])
            try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
                let errors = Locked<[KafkaError]>([])
                let report = try await Self.sendUntilAcknowledged(producer, .numbered(topic: topic, 1), errors: errors)
                #expect(report.topic == topic)
                #expect(producer.clientReplacements == 1)
                let seen = errors.withLock { $0 }
                #expect(seen.allSatisfy { $0.disposition == .fatal }, "only the replaced client's errors: \(seen)")
                for number in 2...5 {
                    await #expect(throws: Never.self) { try await producer.send(.numbered(topic: topic, number)) }
                }
                #expect(producer.fatalError == nil)
            }
        }
    }

    @Test("a replacement client that is fatal again at once is replaced after a growing back-off, not in a tight loop")
    func repeatedFatalErrorsBackOff() async throws {
        try await withTopic("fatal-again", partitions: 1, brokers: 1) { cluster, topic in
            try cluster.pushRequestErrors(apiKey: .initProducerID, errors: Array(repeating: "CLUSTER_AUTHORIZATION_FAILED", count: 4))
            var configuration = TestSupport.producerConfiguration(cluster)
            configuration.replacementBackoff = .milliseconds(400)
            let started = ContinuousClock.now
            try await withProducer(configuration) { producer in
                let errors = Locked<[KafkaError]>([])
                _ = try await Self.sendUntilAcknowledged(producer, .numbered(topic: topic, 1), errors: errors)
                // Four fatal clients: replaced at once, then after 0.4 s, 0.8 s and 1.6 s.
                #expect(producer.clientReplacements == 4)
                #expect(ContinuousClock.now - started >= .milliseconds(2400), "the replacements backed off")
            }
        }
    }

    @Test("a fatal error raised on a running client: replaced, run() keeps running, later sends succeed")
    func fatalErrorOnARunningClient() async throws {
        try await withTopic("fatal-running", partitions: 1, brokers: 1) { cluster, topic in
            let producer = try KafkaProducer(configuration: TestSupport.producerConfiguration(cluster), logger: TestSupport.logger)
            let running = Task { try await producer.run() }
            try await producer.send(.numbered(topic: topic, 0))
            rd_kafka_test_fatal_error(producer.currentClient.client.handle, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "test")
            let errors = Locked<[KafkaError]>([])
            _ = try await Self.sendUntilAcknowledged(producer, .numbered(topic: topic, 1), errors: errors)
            #expect(producer.clientReplacements == 1)
            #expect(errors.withLock { $0 }.allSatisfy { $0.disposition == .fatal })
            #expect(!running.isCancelled)
            await producer.shutdown()
            await #expect(throws: Never.self) { try await running.value }
            let error = await #expect(throws: KafkaError.self) { try await producer.send(.numbered(topic: topic, 2)) }
            #expect(error?.disposition == .shutdown)
        }
    }

    @Test("a record for a partition the topic does not have is rejected, not retried until the delivery timeout")
    func unknownPartitionIsRejected() async throws {
        try await withTopic("two-partitions", partitions: 2, brokers: 1) { cluster, topic in
            try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
                try await producer.send(.numbered(topic: topic, 0))  // metadata known
                var misdirected = KafkaProducerRecord.numbered(topic: topic, 1)
                misdirected.partition = 7
                let record = misdirected
                let error = try await withTimeout("the record's answer", seconds: 10) {
                    await #expect(throws: KafkaError.self) { try await producer.send(record) }
                }
                #expect(error?.code == "_UNKNOWN_PARTITION")
                #expect(error?.disposition == .recordRejected)
            }
        }
    }

    @Test("dispositions of error codes")
    func dispositionTable() {
        func rd(_ err: rd_kafka_resp_err_t) -> KafkaError.Disposition { KafkaError(rdKafka: err).disposition }
        #expect(rd(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT) == .retriable)
        #expect(rd(RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION) == .retriable)
        #expect(rd(RD_KAFKA_RESP_ERR__QUEUE_FULL) == .retriable)
        #expect(rd(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) == .recordRejected)
        #expect(rd(RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) == .recordRejected)
        #expect(rd(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC) == .recordRejected)
        #expect(rd(RD_KAFKA_RESP_ERR_INVALID_RECORD) == .recordRejected)
        #expect(rd(RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE) == .recordRejected)
        #expect(rd(RD_KAFKA_RESP_ERR__INVALID_ARG) == .recordRejected)
        #expect(rd(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) == .unauthorized)
        #expect(rd(RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED) == .unauthorized)
        #expect(rd(RD_KAFKA_RESP_ERR__FATAL) == .fatal)
        #expect(KafkaError(rdKafka: RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED, isFatal: true).disposition == .fatal)
        #expect(rd(RD_KAFKA_RESP_ERR__PURGE_QUEUE) == .shutdown)
        #expect(KafkaError.shutdown("producer").disposition == .shutdown)
        #expect(KafkaError(code: .timeout, message: "t").disposition == .retriable)
        #expect(KafkaError(code: .configuration, message: "c").disposition == .permanent)
    }
}

@Suite("Bounded send", .serialized, .timeLimit(TestSupport.suiteTimeLimit))
struct BoundedSendTests {
    @Test("a send bounded by the caller ends with .timeout (possibly persisted) when the broker is slower than the bound")
    func boundedSendTimesOut() async throws {
        try await withTopic("bounded", partitions: 1, brokers: 1) { cluster, topic in
            let deadlines = DeadlineSweeper()
            try await withProducer(TestSupport.producerConfiguration(cluster), deadlines: deadlines) { producer in
                try await producer.send(.numbered(topic: topic, 0), timeout: .seconds(10))
                #expect(deadlines.pendingCount == 0, "an answered send leaves no deadline behind")

                try cluster.setBrokerRoundTripTime(1, .seconds(10))
                let started = ContinuousClock.now
                let error = await #expect(throws: KafkaError.self) {
                    try await producer.send(.numbered(topic: topic, 1), timeout: .milliseconds(500))
                }
                #expect(error?.code == .timeout)
                #expect(error?.persistenceStatus == .possiblyPersisted)
                #expect(error?.disposition == .retriable)
                #expect(ContinuousClock.now - started < .seconds(9), "returned at the bound, not with the broker (its answer takes 10 s)")

                // The record is still librdkafka's: it is delivered once the broker answers.
                try cluster.setBrokerRoundTripTime(1, .zero)
                #expect(await producer.flush(timeout: .seconds(30)))
                let results = try await producer.send([.numbered(topic: topic, 2), .numbered(topic: topic, 3)], timeout: .seconds(10))
                #expect(results.allSatisfy { (try? $0.get()) != nil })
            }
        }
    }

    @Test("many bounded sends share one deadline sweeper and leave nothing pending")
    func boundedSendsLeaveNothingPending() async throws {
        try await withTopic("bounded-many", partitions: 2, brokers: 1) { cluster, topic in
            let deadlines = DeadlineSweeper()
            try await withProducer(TestSupport.producerConfiguration(cluster), deadlines: deadlines) { producer in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for number in 0..<200 {
                        group.addTask { try await producer.send(.numbered(topic: topic, number), timeout: .seconds(20)) }
                    }
                    try await group.waitForAll()
                }
                #expect(deadlines.pendingCount == 0)
            }
        }
    }
}
