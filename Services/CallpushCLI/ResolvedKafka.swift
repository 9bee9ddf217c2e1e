import Kafka
import Logging

/// Kafka settings after flags and environment are combined.
struct ResolvedKafka: Sendable {
    var configuration: KafkaConfiguration
    var topics: TopicNames
    var connectTimeout: Duration

    var bootstrapText: String { configuration.bootstrapServers.joined(separator: ",") }

    /// Asks the cluster for its metadata (bounded): the check every command makes first, so an
    /// unreachable cluster is reported as such.
    func describeCluster(logger: Logger) async throws(CLIError) -> KafkaClusterDescription {
        let admin: KafkaAdminClient
        do {
            admin = try KafkaAdminClient(configuration: configuration, logger: logger)
        } catch {
            throw CLIError.usage("Kafka configuration: \(error.message)")
        }
        do {
            let description = try await admin.describeCluster(timeout: connectTimeout)
            await admin.shutdown()
            return description
        } catch {
            await admin.shutdown()
            if KafkaAdminClient.isUnreachable(error) { throw CLIError.kafkaUnreachable(bootstrapText, timeout: connectTimeout, error) }
            throw CLIError.kafka("metadata request to \(bootstrapText)", error)
        }
    }

    /// The partition count of `topic`, or a clear error if it does not exist.
    static func partitions(of topic: String, in cluster: KafkaClusterDescription, flag: String) throws(CLIError) -> Int {
        guard let description = cluster.topics[topic], description.partitions > 0 else {
            throw CLIError("topic-missing", "topic \(topic) does not exist (create it with `callpush topics create`, or name another with \(flag))")
        }
        return description.partitions
    }
}
