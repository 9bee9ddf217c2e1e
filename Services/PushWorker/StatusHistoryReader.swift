import CallContract
import Foundation
import Kafka
import Locking
import Logging

/// How much of a status partition's history a dedupe rebuild covered.
public enum StatusHistoryCoverage: Sendable, Hashable {
    /// Every status from `now − window` to the partition's end was read.
    case complete
    /// The rebuild ran out of time: it read the newest statuses back to `reachedBack` (the
    /// timestamp of the oldest status read without a gap; `nil`: none at all) and left out the
    /// older ones.
    case partial(reachedBack: Date?)
    /// The partition's history could not be read at all (e.g. no leader for the whole bound).
    case failed(reason: String)
}

/// Rebuilds dedupe state for newly assigned partitions from the co-partitioned status partitions:
/// every status of the last `window`, read newest first (``KafkaHistoryReader``), so a rebuild
/// that hits its bound leaves out the oldest statuses, never the newest — the newest are those of
/// the events a new owner processes again. Each status is decoded cheaply (``StatusDigest``: five
/// fields, no `CallStatus`).
public struct StatusHistoryReader: Sendable {
    public var kafka: KafkaConfiguration
    public var statusTopic: String
    /// How far back to read; must cover the longest ring window plus redelivery delays.
    public var window: Duration
    /// Bound on one rebuild, look-ups included; what it did not cover is reported per partition.
    public var timeout: Duration
    public var logger: Logger
    /// Statuses per partition in the first chunk read back from the end, and the largest chunk
    /// (see ``KafkaHistoryReader``).
    public var initialChunk = 1_000
    public var maxChunk = 8_000

    /// States after which a delivery must not be pushed again. `retrying` alone is not one: the
    /// previous owner may have died before any push was accepted. Nor is `duplicate`: it says another
    /// copy of the event was handled *or still in progress* when it was written, and a copy in
    /// progress may since have been handed back without an outcome; a handled copy left its own
    /// status, which is what counts.
    static let handledStates: Set<CallStatus.State> = [.sent, .failed, .expired, .cancelled, .rejected]

    public init(kafka: KafkaConfiguration, statusTopic: String, window: Duration, timeout: Duration, logger: Logger) {
        self.kafka = kafka
        self.statusTopic = statusTopic
        self.window = window
        self.timeout = timeout
        self.logger = logger
    }

    /// Reads the status history of `partitions` (newest first, bounded by ``timeout``) and reports:
    /// - `handled(partition, key, rememberUntil)`: a delivery in a handled state (``handledStates``,
    ///   with a device key), to be remembered until `rememberUntil` (its status time + `window`);
    /// - `cancelled(partition, scope, at)`: a call-level cancel marker (state `cancelled`, no
    ///   device key), under the key a cancel is remembered by (its tenant and call id,
    ///   ``CallRequest/cancelScope(callId:tenant:)``).
    ///
    /// Statuses older than `now − window` are skipped. Returns the coverage of every partition;
    /// partial and failed ones are also logged at error.
    public func rebuild(
        partitions: [Int32],
        now: Date,
        handled: (Int32, DeliveryKey, Date) -> Void,
        cancelled: (Int32, String, Date) -> Void
    ) async -> [Int32: StatusHistoryCoverage] {
        guard !partitions.isEmpty else { return [:] }
        let started = ContinuousClock.now
        let since = now.addingTimeInterval(-window.inSeconds)
        var configuration = KafkaConsumerConfiguration(kafka: kafka, mode: .manual, closeTimeout: .seconds(5))
        configuration.kafka.clientID = kafka.clientID + "-status-history"
        configuration.maxBufferedMessages = 5_000
        var reader = KafkaHistoryReader(configuration: configuration, logger: logger)
        reader.initialChunk = initialChunk
        reader.maxChunk = maxChunk
        // A status partition without a leader (a broker failing over while partitions move) is waited
        // for up to two thirds of the bound: giving it up at once leaves the partition's dedupe state
        // empty, and the new owner pushes every redelivered event again. The last third is left for
        // reading: the other partitions are read only once every look-up has ended, and waiting the
        // whole bound for one leader left them all partial.
        reader.lookupTimeout = timeout * 2 / 3

        var read = 0
        var remembered = 0
        let coverage = await reader.read(topic: statusTopic, partitions: partitions, since: since, order: .newestFirst, bound: timeout) { message in
            read += 1
            guard let status = StatusDigest(json: message.value), status.at >= since else { return true }
            if let deviceKey = status.deviceKey {
                if Self.handledStates.contains(status.state) {
                    remembered += 1
                    handled(message.partition, DeliveryKey(callId: status.callId, deviceKey: deviceKey, replay: status.replay),
                            status.at.addingTimeInterval(window.inSeconds))
                }
            } else if status.state == .cancelled {
                remembered += 1
                cancelled(message.partition, status.cancelScope, status.at)
            }
            return true
        }
        var result: [Int32: StatusHistoryCoverage] = [:]
        for partition in partitions {
            switch coverage[partition] {
            case .complete?:
                result[partition] = .complete
            case .partial(let reached)?:
                result[partition] = .partial(reachedBack: reached)
                logger.error("status history only partly read within the bound; older statuses are not in the dedupe state", metadata: [
                    "kafka.partition": "\(partition)", "history.reached": "\(reached.map(ContractCoding.format) ?? "none")",
                    "history.timeout": "\(timeout)",
                ])
            case .failed(let error)?:
                result[partition] = .failed(reason: error.description)
                logger.error("status history could not be read; the dedupe state of the partition is empty", metadata: [
                    "kafka.partition": "\(partition)", "kafka.error": "\(error)",
                ])
            case nil:
                result[partition] = .failed(reason: "not read")
            }
        }
        logger.info("dedupe rebuilt from status history", metadata: [
            "kafka.partitions": "\(partitions.sorted())", "statuses.read": "\(read)", "statuses.remembered": "\(remembered)",
            "duration.ms": "\(Int((ContinuousClock.now - started).inSeconds * 1000))",
        ])
        return result
    }
}
