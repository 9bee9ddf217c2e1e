import CallpushCore
import Kafka
import Logging

/// The start-up check that `voip.call-requests` and `voip.call-status` have the same partition
/// count: the worker writes each status into the request's partition number, so a status
/// topic with fewer partitions cannot take them, and one with more breaks dispatch's and the
/// dedupe rebuild's co-partitioning.
enum TopicLayoutCheck {
    /// Throws a `ConfigurationError` naming `CALLPUSH_TOPIC_STATUS` when the counts differ.
    /// A cluster that cannot be described in time, or a topic not created yet, is logged and
    /// not fatal (the consumer keeps trying to join; a later restart checks again).
    static func run(kafka: KafkaConfiguration, requestsTopic: String, statusTopic: String,
                    timeout: Duration = .seconds(10), logger: Logger) async throws(ConfigurationError) {
        let description: KafkaClusterDescription
        do {
            let admin = try KafkaAdminClient(configuration: kafka, logger: logger)
            do {
                description = try await admin.describeCluster(timeout: timeout)
                await admin.shutdown()
            } catch {
                await admin.shutdown()
                throw error
            }
        } catch {
            logger.warning("could not check the topics' partition counts", metadata: ["error": "\(error)"])
            return
        }
        guard let requests = description.topics[requestsTopic], let status = description.topics[statusTopic] else {
            logger.warning("a topic does not exist yet; create the topics with `callpush topics create`",
                           metadata: ["topics.present": "\(description.topics.keys.filter { [requestsTopic, statusTopic].contains($0) })"])
            return
        }
        guard requests.partitions == status.partitions else {
            throw ConfigurationError("CALLPUSH_TOPIC_STATUS", "\(statusTopic) has \(status.partitions) partitions but \(requestsTopic) has "
                + "\(requests.partitions); they must be equal (statuses go to the request's partition number)")
        }
    }
}
