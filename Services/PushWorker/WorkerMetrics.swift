import CallContract
import Locking
import Prometheus

/// The push-worker's Prometheus metrics. Label values are bounded: app names come from the
/// configuration (an event naming another app counts as `unknown`), states from the contract,
/// reasons from Apple's table or our error codes (unknown reasons are kept verbatim but clipped),
/// partitions from the owned ones — never a token or call id.
public final class WorkerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry

    static let latencyBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]

    private let inFlight: Gauge
    private let assigned: Gauge
    private let dedupeHits: Counter
    private let dedupeEvictions: Counter
    private let cancelsRemembered: Gauge
    private let cancelEvictions: Counter
    private let writesFailing: Gauge
    private let exported = Locked<(dedupeEvictions: Int, cancelEvictions: Int)>((0, 0))

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        inFlight = registry.makeGauge(descriptor: Self.name("in_flight", "", "Deliveries being processed now."), labels: [])
        assigned = registry.makeGauge(descriptor: Self.name("assigned_partitions", "", "Request partitions this worker owns."), labels: [])
        dedupeHits = registry.makeCounter(descriptor: Self.name("dedupe_hits", "total", "Events answered duplicate (no push)."), labels: [])
        dedupeEvictions = registry.makeCounter(
            descriptor: Self.name("dedupe_evictions", "total", "Dedupe entries dropped before their time because a partition's store was full (should stay 0)."),
            labels: [])
        cancelsRemembered = registry.makeGauge(descriptor: Self.name("cancels_remembered", "", "Cancelled calls remembered now."), labels: [])
        cancelEvictions = registry.makeCounter(
            descriptor: Self.name("cancel_evictions", "total", "Cancels forgotten before their time because the cancel memory was full (should stay 0)."),
            labels: [])
        writesFailing = registry.makeGauge(
            descriptor: Self.name("outcome_writes_failing", "seconds", "How long outcome writes to Kafka have failed without a success (0 when the last one succeeded)."),
            labels: [])
    }

    static func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "callpush", subsystem: "worker", metricName: metric, unitName: unit, helpText: help)
    }

    static func clip(_ value: String?) -> String {
        guard let value, !value.isEmpty else { return "none" }
        return String(value.prefix(48))
    }

    fileprivate struct OutcomeLabels: Hashable, Sendable {
        var app: String?
        var platform: DevicePlatform?
        var state: CallStatus.State
        var reason: String?
    }
    private let outcomes = Memo<OutcomeLabels, Counter>()
    private struct LatencyLabels: Hashable, Sendable {
        var app: String
        var platform: DevicePlatform
    }
    private let pushLatencies = Memo<LatencyLabels, DurationHistogram>()

    /// The platform as a label: `ios`, `android`, or `none` (an event too broken to have a device).
    static func platformLabel(_ platform: DevicePlatform?) -> String { platform?.rawValue ?? "none" }

    /// A delivery ended (or an event was rejected) in `state`; `count` deliveries with the same labels.
    func outcome(app: String?, platform: DevicePlatform?, state: CallStatus.State, reason: String?, count: Int = 1) {
        outcomes.value(for: OutcomeLabels(app: app, platform: platform, state: state, reason: reason)) {
            registry.makeCounter(descriptor: Self.name("deliveries", "total", "Deliveries by final state, app, platform and reason."),
                                 labels: [("app", Self.clip(app)), ("platform", Self.platformLabel(platform)), ("state", state.rawValue),
                                          ("reason", Self.clip(reason))])
        }.increment(by: Int64(count))
        if state == .duplicate { dedupeHits.increment(by: Int64(count)) }
    }

    /// The outcomes of a batch (a run's status writes), counted a run of equal labels at a time: one counter
    /// lookup per run instead of one per outcome. Call `flush` at the end.
    struct OutcomeBatch {
        private var labels: OutcomeLabels?
        private var count = 0

        mutating func add(app: String?, platform: DevicePlatform?, state: CallStatus.State, reason: String?, to metrics: WorkerMetrics?) {
            let next = OutcomeLabels(app: app, platform: platform, state: state, reason: reason)
            if next == labels {
                count += 1
                return
            }
            flush(to: metrics)
            (labels, count) = (next, 1)
        }

        mutating func flush(to metrics: WorkerMetrics?) {
            if let labels, count > 0 {
                metrics?.outcome(app: labels.app, platform: labels.platform, state: labels.state, reason: labels.reason, count: count)
            }
            (labels, count) = (nil, 0)
        }
    }

    func retry(app: String, platform: DevicePlatform, reason: String?) {
        registry.makeCounter(descriptor: Self.name("retries", "total", "Push attempts that will be retried, by app, platform and reason."),
                             labels: [("app", Self.clip(app)), ("platform", platform.rawValue), ("reason", Self.clip(reason))]).increment()
    }

    func deadLetter(code: String, platform: DevicePlatform?) {
        registry.makeCounter(descriptor: Self.name("dead_letters", "total", "Events written to the DLQ, by error code and platform."),
                             labels: [("error", Self.clip(code)), ("platform", Self.platformLabel(platform))]).increment()
    }

    /// Time from sending a push to its service's answer: `apns_latency` for iPhones (as before
    /// Android devices existed), `fcm_latency` for Android phones.
    func pushLatency(app: String, platform: DevicePlatform, _ duration: Duration) {
        pushLatencyHistogram(app: app, platform: platform).record(duration)
    }

    /// The push latencies of a wave of answers: the histogram is looked up once per run of answers of one app.
    struct PushLatencyBatch {
        private var last: (app: String, platform: DevicePlatform, histogram: DurationHistogram)?

        mutating func record(app: String, platform: DevicePlatform, _ duration: Duration, to metrics: WorkerMetrics?) {
            guard let metrics else { return }
            if let last, last.app == app, last.platform == platform {
                last.histogram.record(duration)
                return
            }
            let histogram = metrics.pushLatencyHistogram(app: app, platform: platform)
            last = (app, platform, histogram)
            histogram.record(duration)
        }
    }

    private func pushLatencyHistogram(app: String, platform: DevicePlatform) -> DurationHistogram {
        pushLatencies.value(for: LatencyLabels(app: app, platform: platform)) {
            let descriptor = switch platform {
            case .ios: Self.name("apns_latency", "seconds", "Time from sending a push to APNs' answer.")
            case .android: Self.name("fcm_latency", "seconds", "Time from sending an FCM message to FCM's answer (access token included).")
            }
            return registry.makeDurationHistogram(descriptor: descriptor, labels: [("app", Self.clip(app))], buckets: Self.latencyBuckets)
        }
    }

    /// 1 while the app's pushes with one credential are held (suspended, or waiting for a probe)
    /// after its push service refused it: APNs in an environment, or FCM (`environment` `fcm`).
    func setSuspended(app: String, platform: DevicePlatform, environment: String, _ suspended: Bool) {
        registry.makeGauge(descriptor: Self.name("app_suspended", "", "1 while an app's pushes with one credential (APNs environment, or FCM) are held after the push service refused it."),
                           labels: [("app", Self.clip(app)), ("platform", platform.rawValue), ("environment", environment)]).set(to: suspended ? 1 : 0)
    }

    /// An outcome record the topic refused for good (`OutcomeWriteFailure.permanent`).
    func outcomeWriteRefused(code: String) {
        registry.makeCounter(descriptor: Self.name("outcome_writes_refused", "total", "Status or DLQ records Kafka refused for good (too large, no such partition, not authorized), by error."),
                             labels: [("error", Self.clip(code))]).increment()
    }

    /// A dedupe rebuild ended `complete`, `partial` or `failed`.
    func rebuild(result: String) {
        registry.makeCounter(descriptor: Self.name("dedupe_rebuilds", "total", "Dedupe rebuilds from the status topic on assignment, by result (complete, partial, failed)."),
                             labels: [("result", result)]).increment()
    }

    func setWritesFailing(_ duration: Duration) { writesFailing.set(to: duration.inSeconds) }

    /// Bounded memories: the counters follow the totals the stores keep.
    func setMemory(dedupeEvictions dedupeTotal: Int, cancelsRemembered remembered: Int, cancelEvictions cancelTotal: Int) {
        cancelsRemembered.set(to: Double(remembered))
        let (dedupeDelta, cancelDelta) = exported.withLock { exported -> (Int, Int) in
            defer { exported = (max(exported.dedupeEvictions, dedupeTotal), max(exported.cancelEvictions, cancelTotal)) }
            return (max(0, dedupeTotal - exported.dedupeEvictions), max(0, cancelTotal - exported.cancelEvictions))
        }
        if dedupeDelta > 0 { dedupeEvictions.increment(by: Int64(dedupeDelta)) }
        if cancelDelta > 0 { cancelEvictions.increment(by: Int64(cancelDelta)) }
    }

    private let oldestGauges = Locked<[Int32: Gauge]>([:])

    /// The age of each owned partition's oldest unfinished delivery (0 when none is unfinished):
    /// how long its committed offset has been held back.
    func setOldestUnfinished(_ ages: [Int32: Duration], owned: Set<Int32>) {
        let dropped = oldestGauges.withLock { gauges -> [Gauge] in
            let gone = gauges.filter { !owned.contains($0.key) }
            for partition in gone.keys { gauges[partition] = nil }
            for partition in owned {
                let gauge = gauges[partition] ?? registry.makeGauge(
                    descriptor: Self.name("oldest_unfinished_delivery_age", "seconds", "Age of the oldest unfinished delivery, by request partition."),
                    labels: [("partition", String(partition))])
                gauges[partition] = gauge
                gauge.set(to: ages[partition]?.inSeconds ?? 0)
            }
            return Array(gone.values)
        }
        for gauge in dropped { registry.unregisterGauge(gauge) }
    }

    func setInFlight(_ count: Int) { inFlight.set(to: Double(count)) }
    func setAssigned(_ count: Int) { assigned.set(to: Double(count)) }

    private let lagGauges = Locked<[Int32: Gauge]>([:])

    /// Sets the lag of the partitions in `lags` and drops the gauges of partitions no longer in
    /// `owned` (moved to another worker: summing the group's gauges must not count them twice).
    /// An owned partition whose lag is unknown this time keeps its last value.
    func setLags(_ lags: [Int32: Int64], owned: Set<Int32>) {
        let dropped = lagGauges.withLock { gauges -> [Gauge] in
            let gone = gauges.filter { !owned.contains($0.key) }
            for partition in gone.keys { gauges[partition] = nil }
            for (partition, lag) in lags {
                let gauge = gauges[partition] ?? registry.makeGauge(
                    descriptor: Self.name("consumer_lag", "messages", "Messages not yet processed, by request partition."),
                    labels: [("partition", String(partition))])
                gauges[partition] = gauge
                gauge.set(to: Double(lag))
            }
            return Array(gone.values)
        }
        for gauge in dropped { registry.unregisterGauge(gauge) }
    }

    /// The Prometheus text exposition.
    public func exposition() -> String { registry.emitToString() }
}
