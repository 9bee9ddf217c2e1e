import CallTracing
import Hummingbird
import HTTPTypes
import Kafka
import Tracing

/// The span of one traced API request (`POST /v1/calls`, `DELETE /v1/calls/{callId}`): a server
/// span continuing the caller's `traceparent`, with the publish span of its events as a child.
struct RequestTrace: Sendable {
    let tracing: CallTracing
    let span: any Span

    /// Names the call on the request's span.
    func describe(callId: String, app: String?, tenant: String, devices: Int?) {
        span.attributes[SpanAttributeName.callID] = callId
        span.attributes[SpanAttributeName.app] = app
        span.attributes[SpanAttributeName.tenant] = tenant
        if let devices { span.attributes[SpanAttributeName.devices] = devices }
    }

    /// Starts the span of publishing the request's events; its context goes into their headers.
    func publishing() -> PublishTrace? {
        guard let span = tracing.startSpan(SpanName.publishEvents, parent: span.context, kind: .producer) else { return nil }
        span.attributes[SpanAttributeName.messagingSystem] = "kafka"
        span.attributes[SpanAttributeName.messagingOperation] = "send"
        return PublishTrace(span: span, traceParent: tracing.traceParent(of: span.context))
    }
}

/// The span of publishing one request's events to Kafka.
struct PublishTrace: Sendable {
    let span: any Span
    /// What the events carry in their `traceparent` / `tracestate` headers.
    let traceParent: TraceParent?

    func published(partitions: [Int32]) {
        span.attributes[SpanAttributeName.batchSize] = partitions.count
        if let first = partitions.first { span.attributes[SpanAttributeName.partition] = "\(first)" }
        span.end()
    }

    func failed(_ problem: DispatchProblem) {
        span.fail(problem.code.rawValue)
        span.end()
    }
}

extension HTTPField.Name {
    static let traceparent = HTTPField.Name(TraceParent.traceparentHeader)!
    static let tracestate = HTTPField.Name(TraceParent.tracestateHeader)!
}

extension TraceParent {
    /// The caller's W3C context, when its `traceparent` header is well-formed.
    init?(_ request: Request) {
        guard let traceparent = request.headers[.traceparent] else { return nil }
        self.init(traceparent: traceparent, tracestate: request.headers[.tracestate])
    }
}

extension DispatchAPI {
    /// Runs a request's handler in a server span continuing the caller's `traceparent` (the span
    /// is the current context meanwhile, so log lines carry its trace id). Without tracing the
    /// handler just runs.
    func traced(_ name: String, _ request: Request, _ handler: (RequestTrace?) async -> Response) async -> Response {
        guard let span = tracing.startSpan(name, continuing: TraceParent(request), kind: .server) else { return await handler(nil) }
        span.attributes[SpanAttributeName.httpMethod] = request.method.rawValue
        span.attributes[SpanAttributeName.httpRoute] = name.split(separator: " ").last.map(String.init)
        let response = await ServiceContext.withValue(span.context) { await handler(RequestTrace(tracing: tracing, span: span)) }
        span.attributes[SpanAttributeName.httpStatus] = Int(response.status.code)
        // A server span fails on 5xx only (OpenTelemetry's HTTP conventions: a 4xx is the caller's).
        if response.status.code >= 500 { span.fail("\(response.status.code)") }
        span.end()
        return response
    }

    /// The trace headers of the events a request publishes: its publish span's context when
    /// traced; untraced, the caller's `traceparent` passed on unchanged (W3C: a service that does
    /// not trace forwards the context), so the worker can still continue the caller's trace.
    func eventTraceHeaders(_ request: Request, publishing: PublishTrace?) -> [KafkaHeader] {
        if tracing.isOn { return publishing?.traceParent?.kafkaHeaders ?? [] }
        return TraceParent(request)?.kafkaHeaders ?? []
    }
}
