import APNs
import CallContract
import CallTracing
import Kafka
import Tracing

/// The trace of one event's processing: the `process call event` span, continuing the
/// `traceparent` of the record (dispatch's publish span), and its children — decode, dedupe, each
/// APNs attempt, back-offs, the status and DLQ writes.
///
/// Made only when tracing is on (``InboundEvent/init(_:tracing:)``); with tracing off an event has
/// none and each of the processor's trace points is one nil check. The span ends when
/// processing returns, or — for an event handed back before it was processed (revoke, stale
/// message, shutdown) — when the last reference to the event goes.
final class DeliveryTrace: Sendable {
    let tracing: CallTracing
    let span: any Span

    init?(tracing: CallTracing, partition: Int32, offset: Int64, headers: [KafkaHeader]) {
        let parent = TraceParent(kafkaHeaders: headers)
        guard let span = tracing.startSpan(SpanName.processEvent, continuing: parent, kind: .consumer) else { return nil }
        self.tracing = tracing
        self.span = span
        span.attributes[SpanAttributeName.messagingSystem] = "kafka"
        span.attributes[SpanAttributeName.messagingOperation] = "process"
        span.attributes[SpanAttributeName.partition] = "\(partition)"
        span.attributes[SpanAttributeName.offset] = Int(offset)
        // A replayed event links to the trace of the delivery it replays.
        if let linked = headers.first(where: { $0.key == SpanName.linkHeader }) {
            tracing.link(span, to: TraceParent(traceparent: linked.stringValue))
        }
    }

    deinit {
        if span.isRecording {
            span.attributes[SpanAttributeName.state] = "handed-back"
            span.end()
        }
    }

    /// A child span of the processing.
    func child(_ name: String, kind: SpanKind = .internal) -> any Span {
        tracing.startSpan(name, parent: span.context, kind: kind) ?? NoOpTracer.NoOpSpan(context: span.context)
    }

    /// Names the delivery on the processing span (no token: the device key is its hash).
    func describe(_ ring: RingRequest, deviceKey: String) {
        span.attributes[SpanAttributeName.callID] = ring.callId
        span.attributes[SpanAttributeName.app] = ring.app
        span.attributes[SpanAttributeName.tenant] = ring.tenant
        span.attributes[SpanAttributeName.deviceKey] = deviceKey
        span.attributes[SpanAttributeName.replay] = ring.replay
        span.attributes[SpanAttributeName.platform] = ring.device.platform.rawValue
        if let environment = ring.device.environment { span.attributes[SpanAttributeName.apnsEnvironment] = environment.rawValue }
    }

    /// The span of push attempt `number`: `APNs push` for an iPhone, `FCM push` for Android.
    func pushAttempt(_ number: Int, platform: DevicePlatform) -> any Span {
        let attempt = child(platform == .android ? SpanName.fcmPush : SpanName.apnsPush, kind: .client)
        attempt.attributes[SpanAttributeName.attempt] = number
        return attempt
    }

    /// Ends an attempt's span with the push service's answer: HTTP status and reason (Apple's, or
    /// FCM's error code; the transport's code when no answer came).
    static func end(_ span: any Span, with attempt: PushAttempt, platform: DevicePlatform) {
        if let status = attempt.status { span.attributes[SpanAttributeName.httpStatus] = status }
        if let reason = attempt.reason { span.attributes[platform == .android ? SpanAttributeName.fcmReason : SpanAttributeName.apnsReason] = reason }
        if let id = attempt.apnsID { span.attributes[SpanAttributeName.apnsID] = id }
        if attempt.disposition != .sent { span.fail(attempt.reason ?? "no answer") }
        span.end()
    }

    /// Ends the processing span with how it ended.
    func finish(_ result: DeliveryResult) {
        switch result {
        case .finished(let state): span.attributes[SpanAttributeName.state] = state?.rawValue ?? "done"
        case .handedBack: span.attributes[SpanAttributeName.state] = "handed-back"
        }
        span.end()
    }
}

extension InboundEvent {
    /// The event of a record read from the requests topic, with its trace when tracing is on.
    init(_ message: KafkaConsumerMessage, tracing: CallTracing) {
        self.init(partition: message.partition, offset: message.offset, key: message.key, value: message.value, headers: message.headers)
        if tracing.isOn {
            trace = DeliveryTrace(tracing: tracing, partition: message.partition, offset: message.offset, headers: message.headers)
        }
    }

    /// The W3C context the outcome records of this event carry: that of `span` (the write's)
    /// when the event is traced, else the record's own `traceparent` passed on unchanged (a
    /// worker that does not trace keeps dispatch's trace going for the webhook and a replay).
    func outcomeTraceHeaders(_ span: (any Span)?) -> [(String, String)] {
        if let trace, let span {
            return trace.tracing.traceParent(of: span.context)?.headerPairs ?? []
        }
        guard !headers.isEmpty else { return [] }
        return TraceParent(kafkaHeaders: headers)?.headerPairs ?? []
    }
}
