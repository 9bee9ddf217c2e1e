import Kafka

/// What `callpush topics create` must do, decided from the cluster's metadata (pure logic):
/// which topics to create, which already exist as asked, and which problems forbid going on.
struct TopicPlan: Sendable, Equatable {
    /// The topics as asked, in the order requests, status, DLQ.
    var desired: [KafkaNewTopic]
    /// Topics to create.
    var create: [KafkaNewTopic] = []
    /// Topics that exist with the asked partition count.
    var existing: [KafkaTopicDescription] = []
    /// Reasons to stop before creating anything.
    var problems: [String] = []
    /// Things worth saying that do not stop the command.
    var warnings: [String] = []

    /// Plans `desired` (requests, status, DLQ) against `cluster`.
    static func make(requests: KafkaNewTopic, status: KafkaNewTopic, deadLetter: KafkaNewTopic,
                     cluster: KafkaClusterDescription) -> TopicPlan {
        var plan = TopicPlan(desired: [requests, status, deadLetter])
        let brokers = cluster.brokers.count
        for topic in plan.desired where brokers > 0 && topic.replicationFactor > brokers {
            plan.problems.append("\(topic.name): replication factor \(topic.replicationFactor) needs at least that many brokers; the cluster has \(brokers) (use --replication-factor \(brokers))")
        }
        // The worker writes a request's status into the same partition number: counts must match.
        let requestsCount = cluster.topics[requests.name]?.partitions ?? requests.partitions
        let statusCount = cluster.topics[status.name]?.partitions ?? status.partitions
        if requestsCount != statusCount {
            plan.problems.append("\(requests.name) would have \(requestsCount) partitions but \(status.name) \(statusCount): "
                                 + "they must have the same count (statuses are co-partitioned with requests)")
        }
        for topic in plan.desired {
            guard let found = cluster.topics[topic.name] else {
                plan.create.append(topic)
                continue
            }
            plan.existing.append(found)
            if found.partitions != topic.partitions {
                if topic.name == deadLetter.name {
                    plan.warnings.append("\(topic.name) exists with \(found.partitions) partitions (asked \(topic.partitions)); kept as it is")
                } else if requestsCount == statusCount {
                    plan.problems.append("\(topic.name) exists with \(found.partitions) partitions, not \(topic.partitions): "
                                         + "pass --partitions \(found.partitions) to keep it (Kafka cannot shrink a topic, and growing one moves calls between partitions)")
                }
            }
            if found.replicationFactor != topic.replicationFactor {
                plan.warnings.append("\(topic.name) exists with replication factor \(found.replicationFactor) (asked \(topic.replicationFactor)); kept as it is")
            }
        }
        return plan
    }
}
