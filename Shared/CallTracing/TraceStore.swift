import Foundation
import Locking

/// The last `capacity` finished spans, oldest forgotten first: what `callpush dev` keeps so
/// `callpush status <callId> --trace` can show a call's trace without a tracing backend.
public final class TraceStore: Sendable {
    private struct State {
        var spans: [CollectedSpan] = []
        /// Where the next span goes once `spans` is full (the oldest one).
        var next = 0
        var dropped = 0
    }

    /// Most spans kept.
    public let capacity: Int
    private let state = Locked(State())

    public init(capacity: Int = 20_000) {
        self.capacity = max(1, capacity)
    }

    /// Keeps `spans`, forgetting the oldest beyond ``capacity``.
    public func add(_ spans: [CollectedSpan]) {
        state.withLock { state in
            for span in spans {
                if state.spans.count < capacity {
                    state.spans.append(span)
                } else {
                    state.spans[state.next] = span
                    state.next = (state.next + 1) % capacity
                    state.dropped += 1
                }
            }
        }
    }

    /// Spans held now.
    public var count: Int { state.withLock { $0.spans.count } }

    /// Every span held, oldest first.
    public var all: [CollectedSpan] {
        state.withLock { $0.spans }.sorted { ($0.startNanoseconds, $0.endNanoseconds) < ($1.startNanoseconds, $1.endNanoseconds) }
    }

    /// Spans forgotten because the store was full.
    public var dropped: Int { state.withLock { $0.dropped } }

    /// Every span of the traces that touch the call — a span with its `callpush.call.id`, or one
    /// of `traceIDs` (e.g. from its statuses' `traceparent` headers) — and of the traces those
    /// link to or that link to them (a replay and the delivery it replays), oldest first.
    public func spans(callID: String?, traceIDs: Set<String> = []) -> [CollectedSpan] {
        let all = state.withLock { $0.spans }
        var traces = traceIDs
        if let callID {
            for span in all where span.attributes[SpanAttributeName.callID] == callID { traces.insert(span.traceID) }
        }
        // One step of links each way is enough for replay → original.
        var linked = traces
        for span in all {
            if traces.contains(span.traceID) { for link in span.links { linked.insert(link.traceID) } }
            if span.links.contains(where: { traces.contains($0.traceID) }) { linked.insert(span.traceID) }
        }
        return all.filter { linked.contains($0.traceID) }.sorted { ($0.startNanoseconds, $0.endNanoseconds) < ($1.startNanoseconds, $1.endNanoseconds) }
    }
}
