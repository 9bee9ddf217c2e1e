import CRdKafka
import CallpushTestSupport
import Testing

@testable import Kafka

@Suite("Producer", .timeLimit(TestSupport.suiteTimeLimit))
struct ProducerTests {
    @Test("a broker going down and up during production loses and duplicates nothing")
    func brokerDownUpExactlyOnce() async throws {
        try await withTopic("flaky", partitions: 3) { cluster, topic in
            let count = 2000
            var configuration = TestSupport.producerConfiguration(cluster)
            configuration.kafka.properties["reconnect.backoff.ms"] = "20"
            configuration.kafka.properties["reconnect.backoff.max.ms"] = "200"
            try await withProducer(configuration) { producer in
                try await withTimeout("producing through broker restarts", seconds: 60) {
                    try await withThrowingTaskGroup(of: [Result<KafkaDeliveryReport, KafkaError>].self) { tasks in
                        // Ten senders, while broker 1 (a partition leader) goes down and up twice.
                        for chunk in 0..<10 {
                            tasks.addTask {
                                var results: [Result<KafkaDeliveryReport, KafkaError>] = []
                                for slice in stride(from: chunk * 200, to: chunk * 200 + 200, by: 20) {
                                    let records = KafkaProducerRecord.keyed(topic: topic, slice..<slice + 20)
                                    results += try await producer.send(records)
                                }
                                return results
                            }
                        }
                        for _ in 0..<2 {
                            try await Task.sleep(for: .milliseconds(100))
                            try cluster.setBrokerDown(1)
                            try await Task.sleep(for: .milliseconds(300))
                            try cluster.setBrokerUp(1)
                        }
                        var all: [Result<KafkaDeliveryReport, KafkaError>] = []
                        for try await results in tasks { all += results }
                        let failures = errors(in: all)
                        #expect(failures.isEmpty, "all acknowledged: \(failures.prefix(3))")
                        #expect(all.count == count)
                    }
                }
            }
            let received = try await readFromBeginning(topic, partitions: 3, on: cluster, seconds: 30) { $0.count >= count }
            let ids = received.compactMap(\.id)
            #expect(ids.count == count, "no duplicates")
            #expect(Set(ids) == Set(0..<count), "nothing lost")
        }
    }

    @Test("with a tiny local queue, many sends wait for room instead of failing")
    func backPressure() async throws {
        try await withTopic("pressure", partitions: 2, brokers: 1) { cluster, topic in
            var configuration = TestSupport.producerConfiguration(cluster)
            configuration.maxQueuedMessages = 10
            try cluster.setBrokerRoundTripTime(1, .milliseconds(20))
            let reports = try await withProducer(configuration) { producer in
                try await withTimeout("producing with back-pressure", seconds: 60) {
                    try await withThrowingTaskGroup(of: [Result<KafkaDeliveryReport, KafkaError>].self) { tasks in
                        // One large batch plus concurrent single sends, all through a 10-message queue.
                        tasks.addTask { try await producer.send((0..<500).map { KafkaProducerRecord.numbered(topic: topic, $0) }) }
                        for number in 500..<550 {
                            tasks.addTask {
                                do throws(KafkaError) {
                                    return [.success(try await producer.send(KafkaProducerRecord.numbered(topic: topic, number)))]
                                } catch {
                                    return [.failure(error)]
                                }
                            }
                        }
                        var all: [Result<KafkaDeliveryReport, KafkaError>] = []
                        for try await results in tasks { all += results }
                        return all
                    }
                }
            }
            let failures = errors(in: reports)
            #expect(failures.isEmpty, "no queue-full failures: \(failures.prefix(3))")
            #expect(reports.count == 550)
            let received = try await readFromBeginning(topic, partitions: 2, on: cluster, seconds: 30) { $0.count >= 550 }
            #expect(Set(received.compactMap(\.id)) == Set(0..<550))
        }
    }

    @Test("retriable produce errors are survived; a non-retriable one is a typed error")
    func requestErrorInjection() async throws {
        try await withTopic("errors", partitions: 1, brokers: 1) { cluster, topic in
            try await withProducer(TestSupport.producerConfiguration(cluster)) { producer in
                try await withTimeout("error injection", seconds: 40) {
                    // Warm up: connection, metadata and producer id are in place.
                    try await producer.send(KafkaProducerRecord.numbered(topic: topic, 0))

                    try cluster.pushRequestErrors(
                        apiKey: .produce,
                        errors: ["NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS_AFTER_APPEND"]
                    )
                    let report = try await producer.send(KafkaProducerRecord.numbered(topic: topic, 1))
                    #expect(report.topic == topic)
                    #expect(report.offset >= 1)

                    try cluster.pushRequestErrors(apiKey: .produce, errors: ["TOPIC_AUTHORIZATION_FAILED"])
                    let error = await #expect(throws: KafkaError.self) {
                        try await producer.send(KafkaProducerRecord.numbered(topic: topic, 2))
                    }
                    #expect(error?.code == "TOPIC_AUTHORIZATION_FAILED")
                    #expect(error?.isRetriable == false)
                    #expect(error?.disposition == .unauthorized)
                    #expect(error?.persistenceStatus == .notPersisted)
                }
            }
        }
    }

    @Test("a record larger than the broker accepts is rejected at once (not retried), others still go through")
    func oversizedRecord() async throws {
        try await withTopic("big", partitions: 1, brokers: 1) { cluster, topic in
            var configuration = TestSupport.producerConfiguration(cluster)
            configuration.kafka.properties["message.max.bytes"] = "10000"
            try await withProducer(configuration) { producer in
                let results = try await producer.send([
                    KafkaProducerRecord.numbered(topic: topic, 1),
                    KafkaProducerRecord(topic: topic, value: [UInt8](repeating: 1, count: 20_000)),
                    KafkaProducerRecord.numbered(topic: topic, 2),
                ])
                #expect(throws: Never.self) { try results[0].get() }
                #expect(throws: Never.self) { try results[2].get() }
                guard case .failure(let error) = results[1] else {
                    Issue.record("oversized record was accepted")
                    return
                }
                #expect(error.code == "MSG_SIZE_TOO_LARGE")
                #expect(error.disposition == .recordRejected)
                #expect(error.persistenceStatus == .notPersisted)
                #expect(await producer.flush(timeout: .seconds(5)), "nothing left in the queue")
            }
        }
    }

    @Test("after shutdown, sends fail with a shutdown error")
    func sendAfterShutdown() async throws {
        try await withCluster(brokers: 1) { cluster in
            let producer = try KafkaProducer(configuration: TestSupport.producerConfiguration(cluster), logger: TestSupport.logger)
            await producer.shutdown()
            await producer.shutdown()
            let error = await #expect(throws: KafkaError.self) {
                try await producer.send(KafkaProducerRecord(topic: "t", key: nil, value: "x"))
            }
            #expect(error?.code == .shutdown)
        }
    }
}
