/// Spaces publishes to at most `perSecond`.
struct RateLimiter: Sendable {
    private let interval: Duration?
    private var next = ContinuousClock.now

    init(perSecond: Double?) {
        interval = perSecond.map { .nanoseconds(Int64(1e9 / max($0, 0.001))) }
    }

    mutating func wait() async {
        guard let interval else { return }
        let now = ContinuousClock.now
        if next > now { try? await Task.sleep(until: next, clock: .continuous) }
        next = max(next, now) + interval
    }
}
