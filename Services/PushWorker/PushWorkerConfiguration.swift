import CallContract
import Foundation
import Kafka

/// Everything a push-worker needs, with documented defaults.
public struct PushWorkerConfiguration: Sendable {
    /// Brokers and any librdkafka property (security settings, …).
    public var kafka: KafkaConfiguration
    /// Consumer group of all workers. Default `callpush-push-worker`.
    public var groupID = "callpush-push-worker"
    /// `group.instance.id` for static membership; nil (the default) = dynamic membership.
    ///
    /// Only for identities that survive a replacement (a StatefulSet ordinal): librdkafka 2.0.2's
    /// static members never send LeaveGroup, so a member that does not come back holds its
    /// partitions until its session times out (docs/operations.md).
    public var groupInstanceID: String?
    /// Written into statuses (`worker`). Default: host name.
    public var workerID: String
    public var requestsTopic = Topics.requests
    public var statusTopic = Topics.status
    public var deadLetterTopic = Topics.deadLetter
    /// Deliveries in flight at once; consumption pauses when full. Default 2000: a delivery holds its
    /// slot until its status is acknowledged (the push, then the status producer's linger and round
    /// trip), and with 1000 a backlog drained slower and at more CPU per ring, more so with a longer
    /// linger (docs/benchmarks.md, "In flight and linger").
    public var maxInFlight = 2_000
    /// How long revoked partitions / shutdown wait for in-flight work. Default 5 s.
    public var drainTimeout: Duration = .seconds(5)
    /// How far back the status history is read on assignment, and how
    /// long a handled delivery is remembered after its deadline. Default 10 min.
    public var dedupeWindow: Duration = .seconds(600)
    /// Bound on dedupe entries across all partitions of the worker (~100 bytes each). Default
    /// 1,000,000 (~100 MiB), which fits the shipped pod's 512 MiB limit.
    public var dedupeCapacity = 1_000_000
    /// Bound on remembered cancels (whole worker). Default 200,000.
    public var cancelCapacity = 200_000
    /// Bound on one dedupe rebuild. Default 20 s (below the consumer's assign bound).
    public var rebuildTimeout: Duration = .seconds(20)
    /// How long an app's pushes with a credential its push service refused are held before one push probes it
    /// again; doubled on each further refusal, up to 300 s (`CredentialCircuit`). Default 10 s.
    public var credentialCoolDown: Duration = .seconds(10)
    public var retry = RetryPolicy()
    /// Longest wait for one APNs answer. Default 5 s.
    public var attemptTimeout: Duration = .seconds(5)
    /// How long a delivery cancelled by a revoke or shutdown keeps writing the outcome of a push
    /// that went out. Default 10 s.
    public var outcomeWriteBound: Duration = .seconds(10)
    /// Bounds of `/readyz` and `/healthz` (`WorkerHealth`).
    public var health = WorkerHealth.Bounds()
    /// Begun-but-unstored offsets of one partition (waiting behind an unfinished delivery) at which
    /// its fetching pauses; it resumes at half. Default 20 × `maxInFlight`, at least 10,000.
    public var pauseAfterUnstored: Int { max(10_000, 20 * maxInFlight) }

    /// How long a revoke or shutdown waits for deliveries it cancelled after the drain bound: one
    /// APNs attempt, then the bounded write of its outcome.
    var leftoverBound: Duration { attemptTimeout + outcomeWriteBound + .seconds(2) }
    /// `session.timeout.ms` of the group member. Default 45 s (longer with static membership).
    public var sessionTimeout: Duration = .seconds(45)
    public var heartbeatInterval: Duration = .seconds(3)

    public init(kafka: KafkaConfiguration, workerID: String = ProcessInfo.processInfo.hostName) {
        self.kafka = kafka
        self.workerID = workerID
    }

    var consumer: KafkaConsumerConfiguration {
        var kafka = self.kafka
        kafka.clientID = "\(kafka.clientID)-worker"
        return KafkaConsumerConfiguration(
            kafka: kafka, mode: .group(id: groupID, topics: [requestsTopic]), groupInstanceID: groupInstanceID,
            sessionTimeout: sessionTimeout, heartbeatInterval: heartbeatInterval,
            // Ten times the in-flight bound, at most 20,000 (and 64 MiB, the consumer's default byte
            // bound): a pause for back-pressure purges what librdkafka prefetched, and after the
            // resume its next fetch can wait up to `fetch.wait.max.ms` (500 ms; docs/kafka.md), so the half of the
            // buffer left at the resume must outlast that at the drain's rate. At 5,000 (~80 ms at
            // 30k rings/s) a 30,000-event drain stalled 200–370 ms; at 20,000, 45–50 ms, and drained
            // ~45 % faster (docs/benchmarks.md, "In flight and linger").
            maxBufferedMessages: max(100, min(maxInFlight * 10, 20_000)),
            revokeTimeout: drainTimeout + leftoverBound + .seconds(3),
            assignTimeout: rebuildTimeout + .seconds(5))
    }

    /// The status producer, with `linger.ms` 10 (dispatch's is 5): librdkafka 2.0.2's idempotent
    /// producer sends nothing more for a partition while 5 or more of its messages are in flight, and
    /// its broker thread polls without sleeping once the next batch has lingered out, so a linger
    /// shorter than the produce round trip spins (16–17 % of a core in a 150,000-ring drain at 1 ms,
    /// 11–15 % at 5). With 2000 deliveries in flight, 10 ms took 9–11 % less CPU per ring than 5 ms with
    /// 1000 (docs/benchmarks.md, "In flight and linger"). A status reaches dispatch at most the linger
    /// later; the push does not wait for it. `CALLPUSH_KAFKA_LINGER_MS` overrides it.
    var producer: KafkaProducerConfiguration {
        KafkaProducerConfiguration(kafka: kafka, deliveryTimeout: .seconds(30), linger: .milliseconds(10))
    }
}
