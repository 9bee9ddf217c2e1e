import Locking
import Prometheus

/// dispatch's Prometheus metrics. Label values are bounded: routes are the API's patterns,
/// statuses HTTP codes, key names come from the configuration — never a call id or token.
public final class DispatchMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: PrometheusCollectorRegistry

    static let latencyBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(5),
    ]

    private let publishFailures: Counter
    private let viewCalls: Gauge
    private let sseStreams: Gauge
    private let viewEvents: Counter
    private let viewBytes: Gauge
    private let acksRepeated: Counter
    private let ringsDeviceLimited: Counter

    /// Creates the metrics in `registry`.
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        publishFailures = registry.makeCounter(descriptor: Self.name("publish_failures", "total", "Publishes Kafka did not acknowledge in time (answered 503)."), labels: [])
        viewCalls = registry.makeGauge(descriptor: Self.name("view_calls", "", "Calls in the status view."), labels: [])
        sseStreams = registry.makeGauge(descriptor: Self.name("sse_streams", "", "Open SSE streams."), labels: [])
        viewEvents = registry.makeCounter(descriptor: Self.name("view_events", "total", "Events read into the status view."), labels: [])
        viewBytes = registry.makeGauge(descriptor: Self.name("view", "bytes", "Estimated bytes of the calls in the status view."), labels: [])
        ringsDeviceLimited = registry.makeCounter(descriptor: Self.name("rings_device_limited", "total", "Rings refused because the device was rung too often."),
                                                  labels: [])
        acksRepeated = registry.makeCounter(descriptor: Self.name("acks_repeated", "total", "Acks answered again without writing (a repeat of one already reported)."),
                                            labels: [])
    }

    static func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "callpush", subsystem: "dispatch", metricName: metric, unitName: unit, helpText: help)
    }

    private struct RequestLabels: Hashable, Sendable {
        var route: String
        var status: Int
        var key: String?
    }
    private let requestCounters = Memo<RequestLabels, Counter>()
    private let requestDurations = Memo<String, DurationHistogram>()

    /// One API answer.
    func request(route: String, status: Int, key: String?, duration: Duration) {
        requestCounters.value(for: RequestLabels(route: route, status: status, key: key)) {
            registry.makeCounter(descriptor: Self.name("requests", "total", "API requests by route, status and API key name."),
                                 labels: [("route", route), ("status", String(status)), ("key", key ?? "none")])
        }.increment()
        requestDurations.value(for: route) {
            registry.makeDurationHistogram(descriptor: Self.name("request_duration", "seconds", "Time to answer, by route."),
                                           labels: [("route", route)], buckets: Self.latencyBuckets)
        }.record(duration)
    }

    func publishFailure() { publishFailures.increment() }
    func setViewCalls(_ count: Int) { viewCalls.set(to: Double(count)) }
    func setStreams(_ count: Int) { sseStreams.set(to: Double(count)) }
    func viewEvent() { viewEvents.increment() }
    func setViewBytes(_ bytes: Int) { viewBytes.set(to: Double(bytes)) }
    func ackRepeated() { acksRepeated.increment() }
    func deviceRateLimited() { ringsDeviceLimited.increment() }

    /// An ack refused before anything was written; `reason` is one of a fixed few (bad-token, expired, rate-limited).
    func ackRefused(reason: String) {
        registry.makeCounter(descriptor: Self.name("acks_refused", "total", "Acks refused, by reason (bad-token, expired, rate-limited)."),
                             labels: [("reason", reason)]).increment()
    }

    func webhook(_ outcome: String) {
        registry.makeCounter(descriptor: Self.name("webhooks", "total", "Webhook deliveries by outcome (delivered, retried, dropped, failed)."),
                             labels: [("outcome", outcome)]).increment()
    }

    /// The Prometheus text exposition.
    public func exposition() -> String { registry.emitToString() }
}
