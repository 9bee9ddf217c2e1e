import APNsSimulator
import CallContract
import CallTracing
import CallpushTestSupport
import Foundation
import Kafka
import Locking
import ServiceLifecycle
import Testing
@testable import DispatchService

/// One trace per call, end to end: a caller's `traceparent` → dispatch (`POST /v1/calls`, publish)
/// → Kafka → push-worker (APNs attempts against the simulator, status writes) → Kafka → dispatch
/// (SSE stream, webhook POST), exported by swift-otel over OTLP/HTTP to a collector this test
/// serves.
@Suite(.serialized) struct TraceEndToEndTests {
    static let caller = TraceParent(traceparent: "00-5a0be1f4c2d3e4f5a6b7c8d9e0f1a2b3-a1b2c3d4e5f60718-01")!

    /// A collector and the two services' exporters; the exporters are flushed by ``stop()``.
    final class Tracing: Sendable {
        let collector: TraceCollector
        let bodies = Locked<[String]>([])
        let dispatch: TracingBackend
        let worker: TracingBackend
        private let group: ServiceGroup
        private let running: Task<Void, any Error>

        init() async throws {
            let bodies = self.bodies
            collector = TraceCollector(port: 0, onExport: { body in bodies.withLock { $0.append(String(decoding: body, as: UTF8.self)) } },
                                       logger: quietLogger)
            try await collector.start()
            dispatch = try TracingEnvironment.makeBackend(serviceName: "dispatch", tracesEndpoint: collector.tracesURL, json: true,
                                                          scheduleDelay: .milliseconds(50), logger: quietLogger)
            worker = try TracingEnvironment.makeBackend(serviceName: "push-worker", tracesEndpoint: collector.tracesURL, json: true,
                                                        scheduleDelay: .milliseconds(50), logger: quietLogger)
            let group = ServiceGroup(services: [dispatch.service, worker.service], logger: quietLogger)
            self.group = group
            running = Task { try await group.run() }
        }

        func stop() async {
            await group.triggerGracefulShutdown()
            _ = await running.result
            await collector.stop()
        }
    }

    @Test func aCallIsOneTraceFromTheCallersSpanToTheWebhook() async throws {
        let tracing = try await Tracing()
        let receiver = try await WebhookTests.Receiver()
        let hook = receiver.url()
        let callId = CallID.make(), token = hexToken(0x7ace)
        let deadCall = CallID.make(), deadToken = hexToken(0xdead)
        try await DispatchTestbed.with(tracing: tracing.dispatch.tracing, configure: {
            $0.webhooks = ["test": WebhookTarget(url: hook, secret: WebhookTests.secret)]
            $0.webhookDelivery.groupID = "hooks-\(UUID().uuidString)"
            $0.eventStreamLimit = .seconds(60)
        }) { bed in
            let worker = try await bed.startWorker(tracing: tracing.worker.tracing)
            try await WebhookTests.waitAssigned(bed.app)
            // APNs answers 503 until it has refused one push and the call's SSE stream is open: the
            // first attempt is retried, and the `sent` status reaches the stream live (a status the
            // view applied before anyone subscribed is replayed without a `stream status` span).
            // Conditions, not time windows: under load the attempt or the GET can come at any time.
            let steady = APNSSimulatorFaults(tokenOutcomes: [deadToken: .unregistered()])
            var faults = steady
            faults.errorRate = ErrorInjection(status: 503, probability: 1)
            worker.simulator.setFaults(faults)
            let simulator = worker.simulator
            let view = bed.app.view
            let lift = Task {
                let until = ContinuousClock.now + .seconds(60)
                while simulator.stats().rejected["ServiceUnavailable", default: 0] == 0 || view.subscriberCount == 0,
                      ContinuousClock.now < until {
                    try? await Task.sleep(for: .milliseconds(20))
                }
                simulator.setFaults(steady)
            }

            var headers = testAuth
            headers["traceparent"] = Self.caller.traceparent
            let accepted = try await bed.post("/v1/calls", json(ringBody(callId: callId, tokens: [token], ringTimeoutSeconds: 30)), headers: headers)
            #expect(accepted.status == 202)
            let stream = try await bed.get("/v1/calls/\(callId)/events", timeout: .seconds(70))
            await lift.value
            #expect(EndToEndTests.sseEvents(stream.text).last?.data == "{\"complete\":true}")
            // `retrying` statuses (one per 503) are posted too: wait for the `sent` one.
            var hooks = try await receiver.wait(for: 1)
            let hooked = ContinuousClock.now + .seconds(30)
            while !hooks.contains(where: { $0.status.callId == callId && $0.status.state == .sent }), ContinuousClock.now < hooked {
                try await Task.sleep(for: .milliseconds(50))
                hooks = try await receiver.wait(for: 1)
            }
            #expect(hooks.contains { $0.status.callId == callId && $0.status.state == .sent })

            #expect(try await bed.post("/v1/calls", json(ringBody(callId: deadCall, tokens: [deadToken]))).status == 202)
            _ = try await bed.waitForCall(deadCall) { $0["complete"] as? Bool == true }
            let dlq = try await bed.readAll(bed.topics.dlq, partitions: 1, count: 1, seconds: 10)
            try #require(dlq.count == 1)
            await bed.stop(worker)
            // The webhook POSTs' spans end when their answers are read: wait for them to be exported.
            let flushed = ContinuousClock.now + .seconds(20)
            while !tracing.collector.store.spans(callID: callId).contains(where: { $0.name == SpanName.webhook && $0.attributes[SpanAttributeName.httpStatus] != nil }),
                  ContinuousClock.now < flushed {
                try await Task.sleep(for: .milliseconds(50))
            }
            await tracing.stop()
            let spans = tracing.collector.store.spans(callID: callId)
            #expect(Set(spans.map(\.traceID)) == [Self.caller.traceID], "one trace, the caller's")
            func one(_ name: String, service: String) throws -> CollectedSpan {
                try #require(spans.first { $0.name == name && $0.service == service }, "\(name) of \(service) in \(spans.map(\.name))")
            }
            let post = try one(SpanName.ring, service: "dispatch")
            #expect(post.parentSpanID == Self.caller.spanID, "the POST continues the caller's span")
            #expect(post.kind == "server")
            #expect(post.attributes[SpanAttributeName.callID] == callId)
            #expect(post.attributes[SpanAttributeName.app] == "rider")
            #expect(post.attributes[SpanAttributeName.tenant] == "test")
            #expect(post.attributes[SpanAttributeName.httpStatus] == "202")
            let publish = try one(SpanName.publishEvents, service: "dispatch")
            #expect(publish.parentSpanID == post.spanID)
            let process = try one(SpanName.processEvent, service: "push-worker")
            #expect(process.parentSpanID == publish.spanID, "the worker continues the context of the ring event's headers")
            #expect(process.attributes[SpanAttributeName.state] == "sent")
            #expect(process.attributes[SpanAttributeName.partition] != nil && process.attributes[SpanAttributeName.offset] != nil)

            let attempts = spans.filter { $0.name == SpanName.apnsPush }.sorted { $0.startNanoseconds < $1.startNanoseconds }
            #expect(attempts.count >= 2, "retried after 503")
            #expect(attempts.allSatisfy { $0.parentSpanID == process.spanID })
            #expect(attempts.first?.attributes[SpanAttributeName.httpStatus] == "503")
            #expect(attempts.first?.attributes[SpanAttributeName.apnsReason] == "ServiceUnavailable")
            #expect(attempts.last?.attributes[SpanAttributeName.httpStatus] == "200")
            #expect(attempts.map { $0.attributes[SpanAttributeName.attempt] } == (1...attempts.count).map { "\($0)" })

            let writes = spans.filter { $0.name == SpanName.writeStatus }
            #expect(writes.allSatisfy { $0.parentSpanID == process.spanID })
            let sentWrite = try #require(writes.first { $0.attributes[SpanAttributeName.state] == "sent" })
            let streamed = spans.filter { $0.name == SpanName.streamStatus }
            #expect(!streamed.isEmpty, "statuses written to the SSE stream")
            #expect(streamed.allSatisfy { span in writes.contains { $0.spanID == span.parentSpanID } })
            let posts = spans.filter { $0.name == SpanName.webhook }
            #expect(posts.contains { $0.parentSpanID == sentWrite.spanID }, "the webhook POST continues the status write")
            let sentHook = try #require(hooks.first { $0.status.callId == callId && $0.status.state == .sent })
            let carried = try #require(TraceParent(traceparent: sentHook.traceparent), "the POST carried a traceparent")
            #expect(carried.traceID == Self.caller.traceID)
            #expect(posts.contains { $0.spanID == carried.spanID }, "…the POST span's own")

            // The dead-lettered call: its DLQ record carries its trace.
            let deadSpans = tracing.collector.store.spans(callID: deadCall)
            let deadTrace = try #require(deadSpans.first { $0.name == SpanName.ring }?.traceID)
            let kept = try #require(TraceParent(kafkaHeaders: dlq[0].headers), "the DLQ record keeps a traceparent")
            #expect(kept.traceID == deadTrace)
            #expect(deadSpans.contains { $0.name == SpanName.writeDeadLetter && $0.spanID == kept.spanID })
            #expect(deadSpans.contains { $0.name == SpanName.apnsPush && $0.attributes[SpanAttributeName.apnsReason] == "Unregistered" })

            let exported = tracing.bodies.withLock { $0 }
            #expect(!exported.isEmpty)
            for secret in [token, deadToken, testKey] {
                #expect(exported.allSatisfy { !$0.contains(secret) }, "no device token or API key in the exported data")
            }
        }
        await tracing.stop()
        await receiver.stop()
    }

    /// dispatch without a tracer passes the caller's context on: the worker (if it traces)
    /// continues the caller's trace.
    @Test func untracedDispatchPassesTheCallersTraceparentToTheRingEvents() async throws {
        try await APIHarness.with { h in
            var headers = testAuth
            headers["traceparent"] = Self.caller.traceparent
            headers["tracestate"] = "vendor=abc"
            let traced = try await h.post("/v1/calls", json(ringBody(tokens: [hexToken(1), hexToken(2)])), headers: headers)
            #expect(traced.status == 202)
            let plain = try await h.post("/v1/calls", json(ringBody(tokens: [hexToken(3)])))
            #expect(plain.status == 202)
            let records = h.publisher.records.withLock { $0 }
            #expect(records.count == 3)
            #expect(records.prefix(2).allSatisfy { TraceParent(kafkaHeaders: $0.headers) == TraceParent(traceparent: Self.caller.traceparent, tracestate: "vendor=abc") })
            #expect(TraceParent(kafkaHeaders: records[2].headers) == nil, "no traceparent, none invented")
            headers["traceparent"] = "00-zz-bad"
            let malformed = try await h.post("/v1/calls", json(ringBody(tokens: [hexToken(4)])), headers: headers)
            #expect(malformed.status == 202, "a bad traceparent is ignored")
            #expect(TraceParent(kafkaHeaders: h.publisher.records.withLock { $0 }[3].headers) == nil)

            // A cancel is published, and carries the caller's context too.
            let callId = CallID.make()
            #expect(try await h.post("/v1/calls", json(ringBody(callId: callId)), headers: testAuth).status == 202)
            headers["traceparent"] = Self.caller.traceparent
            let cancelled = try await TestHTTPClient.request(.DELETE, port: h.port, path: "/v1/calls/\(callId)", headers: headers)
            #expect(cancelled.status == 202)
            let cancel = try #require(h.publisher.records.withLock { $0 }.last)
            guard case .cancel? = try? CallRequest.decode(cancel.value) else {
                Issue.record("the DELETE published no cancel event")
                return
            }
            #expect(TraceParent(kafkaHeaders: cancel.headers)?.traceparent == Self.caller.traceparent)
        }
    }
}
