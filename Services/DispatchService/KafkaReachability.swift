import Kafka
import Logging
import ServiceLifecycle
import Synchronization

/// Whether Kafka answers, for `/readyz`: a bounded metadata request every `interval` (the first at
/// start). A load balancer then stops sending rings to an instance that could only answer 503.
public final class KafkaReachability: Service, Sendable {
    private let kafka: KafkaConfiguration
    private let interval: Duration
    private let timeout: Duration
    private let logger: Logger
    private let reachable = Atomic<Bool>(false)

    public init(kafka: KafkaConfiguration, interval: Duration = .seconds(5), timeout: Duration = .seconds(2), logger: Logger) {
        self.kafka = kafka
        self.interval = interval
        self.timeout = min(timeout, interval)
        self.logger = logger
    }

    /// The last probe's answer (false until the first succeeds).
    public var isReachable: Bool { reachable.load(ordering: .acquiring) }

    public func run() async throws {
        let admin = try KafkaAdminClient(configuration: kafka, logger: logger)
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let ok: Bool
                do {
                    _ = try await admin.describeCluster(timeout: self.timeout)
                    ok = true
                } catch {
                    ok = false
                }
                let was = self.reachable.exchange(ok, ordering: .acquiringAndReleasing)
                if was != ok {
                    if ok { self.logger.notice("Kafka is reachable") } else { self.logger.warning("Kafka is not reachable; /readyz answers 503") }
                }
                try? await Task.sleep(for: self.interval)
            }
        }
        await admin.shutdown()
    }
}
