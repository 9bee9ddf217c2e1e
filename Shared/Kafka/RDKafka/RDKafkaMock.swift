import CRdKafka
import Logging

/// The librdkafka mock-cluster calls behind ``EmbeddedKafkaCluster``, so that its file imports no
/// C. Each fault call answers a librdkafka error code (``ok`` when accepted), for the cluster to
/// turn into a ``KafkaError`` naming what it did.
enum RDKafkaMock {
    static let ok: Int32 = RD_KAFKA_RESP_ERR_NO_ERROR.rawValue

    /// The dummy producer handle a mock cluster needs (it must outlive the cluster).
    static func host(logger: Logger) throws(KafkaError) -> RDKafkaClient {
        try RDKafkaClient.create(
            type: RD_KAFKA_PRODUCER,
            properties: ["client.id": "embedded-kafka-cluster"],
            logger: logger,
            delegate: nil,
            servesMainQueue: false
        )
    }

    /// Starts a mock cluster of `brokers` brokers on `host`: its handle and bootstrap servers.
    /// On failure `host`'s handle is destroyed.
    static func start(on host: RDKafkaClient, brokers: Int) throws(KafkaError) -> (UncheckedHandle, String) {
        guard let mock = rd_kafka_mock_cluster_new(host.handle, Int32(brokers)),
            let bootstraps = rd_kafka_mock_cluster_bootstraps(mock)
        else {
            rd_kafka_destroy(host.handle)
            throw KafkaError(code: "mock_cluster", message: "rd_kafka_mock_cluster_new failed")
        }
        return (UncheckedHandle(mock), String(cString: bootstraps))
    }

    /// Stops a mock cluster (blocking).
    static func destroy(_ mock: OpaquePointer) {
        rd_kafka_mock_cluster_destroy(mock)
    }

    static func createTopic(_ mock: OpaquePointer, _ topic: String, partitions: Int, replicationFactor: Int) -> Int32 {
        rd_kafka_mock_topic_create(mock, topic, Int32(partitions), Int32(replicationFactor)).rawValue
    }

    static func setBrokerDown(_ mock: OpaquePointer, _ id: Int32) -> Int32 {
        rd_kafka_mock_broker_set_down(mock, id).rawValue
    }

    static func setBrokerUp(_ mock: OpaquePointer, _ id: Int32) -> Int32 {
        rd_kafka_mock_broker_set_up(mock, id).rawValue
    }

    static func setBrokerRoundTripTime(_ mock: OpaquePointer, _ id: Int32, milliseconds: Int32) -> Int32 {
        rd_kafka_mock_broker_set_rtt(mock, id, milliseconds).rawValue
    }

    static func setPartitionLeader(_ mock: OpaquePointer, topic: String, partition: Int32, broker id: Int32) -> Int32 {
        rd_kafka_mock_partition_set_leader(mock, topic, partition, id).rawValue
    }

    /// Makes metadata requests for `topic` fail with `code` (``ok`` clears it).
    static func setTopicError(_ mock: OpaquePointer, topic: String, code: Int32) -> Int32 {
        rd_kafka_mock_topic_set_error(mock, topic, rd_kafka_resp_err_t(rawValue: code))
        return ok
    }

    /// Makes the next `codes.count` requests of API `apiKey` fail with `codes`, in order.
    static func pushRequestErrors(_ mock: OpaquePointer, apiKey: Int16, codes: [Int32]) -> Int32 {
        let errors = codes.map { rd_kafka_resp_err_t(rawValue: $0) }
        errors.withUnsafeBufferPointer { buffer in
            rd_kafka_mock_push_request_errors_array(mock, apiKey, buffer.count, buffer.baseAddress)
        }
        return ok
    }

    /// Looks up a librdkafka error code by its name (as in `rd_kafka_err2name`).
    static func responseError(named name: String) throws(KafkaError) -> Int32 {
        var descriptionsPointer: UnsafePointer<rd_kafka_err_desc>?
        var count = 0
        rd_kafka_get_err_descs(&descriptionsPointer, &count)
        guard let descriptions = descriptionsPointer else {
            throw KafkaError(code: .invalidUsage, message: "no librdkafka error table")
        }
        for index in 0..<count {
            let description = descriptions[index]
            if let entryName = description.name, String(cString: entryName) == name {
                return description.code.rawValue
            }
        }
        throw KafkaError(code: .invalidUsage, message: "unknown librdkafka error name '\(name)'")
    }
}
