import CRdKafka
import Logging

/// The blocking librdkafka calls behind ``KafkaAdminClient``: a metadata request and
/// CreateTopics. Callers run them on a dedicated thread (``BlockingCall``).
enum RDKafkaAdmin {
    /// `rd_kafka_metadata` for all topics (never auto-creates one), bounded by `timeoutMs`.
    static func metadata(_ handle: OpaquePointer, timeoutMs: Int32) -> Result<KafkaClusterDescription, KafkaError> {
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(handle, 1, nil, &metadata, timeoutMs)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
            return .failure(KafkaError(rdKafka: err, context: "metadata request"))
        }
        defer { rd_kafka_metadata_destroy(metadata) }
        var brokers: [String] = []
        if let list = metadata.pointee.brokers {
            for index in 0..<Int(metadata.pointee.broker_cnt) {
                let broker = list[index]
                brokers.append("\(broker.host.map { String(cString: $0) } ?? "?"):\(broker.port)")
            }
        }
        var topics: [String: KafkaTopicDescription] = [:]
        if let list = metadata.pointee.topics {
            for index in 0..<Int(metadata.pointee.topic_cnt) {
                let topic = list[index]
                guard let namePointer = topic.topic, topic.err == RD_KAFKA_RESP_ERR_NO_ERROR else { continue }
                let name = String(cString: namePointer)
                let count = Int(topic.partition_cnt)
                var replication = 0
                var leaderless = 0
                if let partitions = topic.partitions, count > 0 {
                    replication = Int(partitions[0].replica_cnt)
                    for partition in 0..<count where partitions[partition].leader < 0 { leaderless += 1 }
                }
                topics[name] = KafkaTopicDescription(
                    name: name, partitions: count, replicationFactor: replication, partitionsWithoutLeader: leaderless)
            }
        }
        return .success(KafkaClusterDescription(brokers: brokers, topics: topics))
    }

    /// `rd_kafka_CreateTopics` and a bounded wait for its result event.
    static func createTopics(
        _ handle: OpaquePointer,
        _ topics: [KafkaNewTopic],
        timeoutMs: Int32
    ) -> Result<[KafkaTopicCreationResult], KafkaError> {
        var errstr = [CChar](repeating: 0, count: 512)
        var newTopics: [OpaquePointer?] = []
        defer { for topic in newTopics { rd_kafka_NewTopic_destroy(topic) } }
        for topic in topics {
            guard let newTopic = rd_kafka_NewTopic_new(
                topic.name, Int32(clamping: topic.partitions), Int32(clamping: topic.replicationFactor), &errstr, errstr.count)
            else {
                return .failure(KafkaError(code: .configuration, message: "topic \(topic.name): \(String(errorBuffer: errstr))"))
            }
            newTopics.append(newTopic)
            for key in topic.configs.keys.sorted() {
                let err = rd_kafka_NewTopic_set_config(newTopic, key, topic.configs[key] ?? "")
                guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
                    return .failure(KafkaError(rdKafka: err, context: "topic \(topic.name): config \(key)"))
                }
            }
        }
        guard let options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_CREATETOPICS) else {
            return .failure(KafkaError(code: .configuration, message: "rd_kafka_AdminOptions_new failed"))
        }
        defer { rd_kafka_AdminOptions_destroy(options) }
        _ = rd_kafka_AdminOptions_set_request_timeout(options, timeoutMs, &errstr, errstr.count)
        _ = rd_kafka_AdminOptions_set_operation_timeout(options, timeoutMs, &errstr, errstr.count)
        guard let queue = rd_kafka_queue_new(handle) else {
            return .failure(KafkaError(code: .configuration, message: "rd_kafka_queue_new failed"))
        }
        defer { rd_kafka_queue_destroy(queue) }
        newTopics.withUnsafeMutableBufferPointer { buffer in
            rd_kafka_CreateTopics(handle, buffer.baseAddress, buffer.count, options, queue)
        }
        // The request carries its own timeout; the extra second lets its result event arrive.
        guard let event = rd_kafka_queue_poll(queue, timeoutMs + 1000) else {
            return .failure(KafkaError(code: .timeout, message: "CreateTopics: no answer within \(timeoutMs) ms", isRetriable: true))
        }
        defer { rd_kafka_event_destroy(event) }
        let eventErr = rd_kafka_event_error(event)
        guard eventErr == RD_KAFKA_RESP_ERR_NO_ERROR else {
            var error = KafkaError(rdKafka: eventErr)
            if let text = rd_kafka_event_error_string(event).map({ String(cString: $0) }), !text.isEmpty { error.message = text }
            error.message = "CreateTopics: " + error.message
            return .failure(error)
        }
        guard let result = rd_kafka_event_CreateTopics_result(event) else {
            return .failure(KafkaError(code: .invalidUsage, message: "CreateTopics: unexpected result event"))
        }
        var count = 0
        guard let results = rd_kafka_CreateTopics_result_topics(result, &count) else { return .success([]) }
        return .success((0..<count).compactMap { index -> KafkaTopicCreationResult? in
            guard let topicResult = results[index] else { return nil }
            let name = rd_kafka_topic_result_name(topicResult).map { String(cString: $0) } ?? ""
            let err = rd_kafka_topic_result_error(topicResult)
            guard err != RD_KAFKA_RESP_ERR_NO_ERROR else { return KafkaTopicCreationResult(name: name, error: nil) }
            let text = rd_kafka_topic_result_error_string(topicResult).map { String(cString: $0) }
            return KafkaTopicCreationResult(name: name, error: KafkaError(rdKafka: err, context: text))
        })
    }
}

extension RDKafkaClient {
    /// The client behind ``KafkaAdminClient``: a producer-type handle whose main queue nobody
    /// serves (it only makes metadata and admin requests).
    static func admin(properties: [String: String], logger: Logger) throws(KafkaError) -> RDKafkaClient {
        try create(type: RD_KAFKA_PRODUCER, properties: properties, logger: logger, delegate: nil, servesMainQueue: false)
    }
}
