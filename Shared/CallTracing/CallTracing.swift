import Kafka
import Tracing

/// The tracer callpush's services trace calls with — or none: tracing is off by default, and
/// then every helper here returns nil at once (no span, no context, no header work), so the
/// services' hot paths pay one branch.
///
/// A service gets its tracer injected (``TracingEnvironment`` builds it from the `OTEL_*`
/// variables) instead of using the process-global `InstrumentationSystem`: `callpush dev` runs
/// dispatch and workers in one process, each with its own service name, and tests run several
/// stacks side by side, each exporting to its own receiver.
public struct CallTracing: Sendable {
    /// The tracer, nil when tracing is off.
    public let tracer: (any Tracer)?

    /// Traces with `tracer` (nil: off).
    public init(tracer: (any Tracer)?) {
        self.tracer = tracer
    }

    /// Tracing off: no spans, nothing extracted or injected.
    public static let off = CallTracing(tracer: nil)

    /// Whether spans are made.
    @inlinable public var isOn: Bool { tracer != nil }

    /// The context to continue from a carried `traceparent`; nil when off or when there is none.
    public func context(continuing parent: TraceParent?) -> ServiceContext? {
        guard let tracer, let parent else { return nil }
        var context = ServiceContext.topLevel
        tracer.extract(parent, into: &context, using: TraceParentExtractor())
        return context
    }

    /// Starts a span: a child of `parent` (a context from ``context(continuing:)`` or a span's
    /// `context`), or the root of a new trace when `parent` is nil; at `instant` (default now).
    /// Nil when tracing is off.
    public func startSpan(_ name: String, parent: ServiceContext?, kind: SpanKind = .internal,
                          at instant: DefaultTracerClock.Instant? = nil) -> (any Span)? {
        guard let tracer else { return nil }
        return tracer.startSpan(name, context: parent ?? .topLevel, ofKind: kind, at: instant ?? DefaultTracerClock.now)
    }

    /// Starts a span continuing a carried `traceparent` (a new trace when there is none, or it is
    /// malformed). Nil when tracing is off.
    public func startSpan(_ name: String, continuing parent: TraceParent?, kind: SpanKind = .internal,
                          at instant: DefaultTracerClock.Instant? = nil) -> (any Span)? {
        guard isOn else { return nil }
        return startSpan(name, parent: context(continuing: parent), kind: kind, at: instant)
    }

    /// The W3C context of `context` (a span's), to put into outgoing headers; nil when off or
    /// when the context carries no span.
    public func traceParent(of context: ServiceContext) -> TraceParent? {
        guard let tracer else { return nil }
        var carrier = TraceHeaderValues()
        tracer.inject(context, into: &carrier, using: TraceHeaderInjector())
        return TraceParent(traceparent: carrier.traceparent, tracestate: carrier.tracestate)
    }

    /// Adds a link from `span` to the trace `linked` belongs to (a replay to the delivery it
    /// replays). Does nothing when off or when `linked` is nil.
    public func link(_ span: (any Span)?, to linked: TraceParent?) {
        guard let span, let context = context(continuing: linked) else { return }
        span.addLink(SpanLink(context: context, attributes: [:]))
    }
}

/// Reads the two W3C headers from a validated ``TraceParent`` (the only carrier a tracer is
/// handed: never a request's or record's whole header set, which may hold secrets the tracer
/// could log).
struct TraceParentExtractor: Extractor {
    func extract(key: String, from carrier: TraceParent) -> String? {
        switch key {
        case TraceParent.traceparentHeader: carrier.traceparent
        case TraceParent.tracestateHeader: carrier.tracestate
        default: nil
        }
    }
}

/// What a tracer injects: the W3C headers, nothing else.
struct TraceHeaderValues: Sendable {
    var traceparent: String?
    var tracestate: String?
}

struct TraceHeaderInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout TraceHeaderValues) {
        switch key {
        case TraceParent.traceparentHeader: carrier.traceparent = value
        case TraceParent.tracestateHeader: carrier.tracestate = value
        default: break
        }
    }
}

extension Span {
    /// Marks the span failed with a short description (never a token or secret: callers pass
    /// codes and reasons).
    public func fail(_ description: String) {
        setStatus(SpanStatus(code: .error, message: description))
    }
}
