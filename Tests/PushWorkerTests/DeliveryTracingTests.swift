import CallContract
import CallTracing
import Foundation
import Kafka
import Locking
import Logging
import ServiceLifecycle
import Testing
@testable import PushWorker

/// The worker's part of a call's trace: it continues the record's `traceparent`, makes a span per
/// step (decode, dedupe, each APNs attempt, back-off, status and DLQ writes) and writes the
/// trace's context into its outcome records — exported by swift-otel over OTLP/HTTP to a
/// collector in the test.
@Suite(.enabled(if: TracingEnvironment.hasOTLPExporter, "the ThreadSanitizer build has no OTLP exporter (Package.swift)"))
struct DeliveryTracingTests {
    static let caller = TraceParent(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "vendor=1")!
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Runs `work` with a tracing backend exporting to a local collector; returns what arrived once flushed.
    func traced(_ work: (TracingBackend) async throws -> Void) async throws -> (spans: [CollectedSpan], bodies: [String]) {
        let bodies = Locked<[String]>([])
        let store = TraceStore()
        let collector = TraceCollector(store: store, port: 0, onExport: { body in bodies.withLock { $0.append(String(decoding: body, as: UTF8.self)) } },
                                       logger: Self.quiet)
        try await collector.start()
        let backend = try TracingEnvironment.makeBackend(serviceName: "push-worker", tracesEndpoint: collector.tracesURL, json: true,
                                                         scheduleDelay: .milliseconds(20), logger: Self.quiet)
        let group = ServiceGroup(services: [backend.service], logger: Self.quiet)
        let running = Task { try await group.run() }
        do {
            try await work(backend)
        } catch {
            await group.triggerGracefulShutdown()
            await collector.stop()
            throw error
        }
        await group.triggerGracefulShutdown() // flushes what is batched
        _ = await running.result
        await collector.stop()
        return (store.all, bodies.withLock { $0 })
    }

    func message(_ request: CallRequest, headers: [KafkaHeader], partition: Int32 = 3, offset: Int64 = 100) throws -> KafkaConsumerMessage {
        KafkaConsumerMessage(topic: "requests", partition: partition, offset: offset, key: Array(request.callId.utf8),
                             value: Array(try request.encoded()), headers: headers)
    }

    @Test func aRetriedRingIsOneTraceUnderTheDispatchSpanWithAnAttemptSpanPerAPNSAnswer() async throws {
        let h = Harness()
        let ring = makeRing(token: String(repeating: "c4", count: 32))
        h.sender.script(ring.device.token, [.unavailable])
        let origin = KafkaHeader(key: "callpush-origin", string: "dispatch-1/x")
        let (spans, bodies) = try await traced { backend in
            let tracing = backend.tracing
            let event = InboundEvent(try message(.ring(ring), headers: [origin] + Self.caller.kafkaHeaders), tracing: tracing)
            #expect(await h.processor.process(event) == .finished(.sent))
        }
        #expect(!spans.isEmpty && spans.allSatisfy { $0.traceID == Self.caller.traceID }, "one trace, the caller's: \(spans.map(\.name))")
        let process = try #require(spans.first { $0.name == SpanName.processEvent })
        #expect(process.parentSpanID == Self.caller.spanID, "continues the span whose context the record carries")
        #expect(process.kind == "consumer")
        #expect(process.attributes[SpanAttributeName.callID] == ring.callId)
        #expect(process.attributes[SpanAttributeName.app] == "rider")
        #expect(process.attributes[SpanAttributeName.deviceKey] == DeviceKey.make(token: ring.device.token))
        #expect(process.attributes[SpanAttributeName.partition] == "3")
        #expect(process.attributes[SpanAttributeName.offset] == "100")
        #expect(process.attributes[SpanAttributeName.state] == "sent")

        let children = spans.filter { $0.parentSpanID == process.spanID }
        #expect(Set(children.map(\.name)) == [SpanName.decode, SpanName.dedupe, SpanName.apnsPush, SpanName.backoff, SpanName.writeStatus])
        #expect(children.first { $0.name == SpanName.dedupe }?.attributes[SpanAttributeName.duplicate] == "false")
        let attempts = children.filter { $0.name == SpanName.apnsPush }.sorted { $0.startNanoseconds < $1.startNanoseconds }
        try #require(attempts.count == 2)
        #expect(attempts[0].attributes[SpanAttributeName.attempt] == "1")
        #expect(attempts[0].attributes[SpanAttributeName.httpStatus] == "503")
        #expect(attempts[0].attributes[SpanAttributeName.apnsReason] == "ServiceUnavailable")
        #expect(attempts[0].error == "ServiceUnavailable")
        #expect(attempts[1].attributes[SpanAttributeName.attempt] == "2")
        #expect(attempts[1].attributes[SpanAttributeName.httpStatus] == "200")
        #expect(attempts[1].error == nil)

        // Each status record carries the context of the span that wrote it.
        let writes = children.filter { $0.name == SpanName.writeStatus }
        #expect(Set(writes.compactMap { $0.attributes[SpanAttributeName.state] }) == ["retrying", "sent"])
        let carried = h.publisher.statusHeaders.compactMap { TraceParent(traceparent: $0["traceparent"], tracestate: $0["tracestate"]) }
        #expect(carried.count == 2)
        #expect(Set(carried.map(\.spanID)) == Set(writes.map(\.spanID)))
        #expect(carried.allSatisfy { $0.traceID == Self.caller.traceID && $0.tracestate == "vendor=1" }, "tracestate goes on too")

        #expect(bodies.allSatisfy { !$0.contains(ring.device.token) }, "the device token is in no exported span")
        #expect(spans.allSatisfy { $0.attributes.values.allSatisfy { !$0.contains(ring.device.token) } })
    }

    @Test func untracedTheRecordsTraceparentIsPassedOnToTheStatusAndTheDeadLetter() async throws {
        let h = Harness()
        let ring = makeRing(token: String(repeating: "d5", count: 32))
        h.sender.script(ring.device.token, [.unregistered])
        let event = InboundEvent(try message(.ring(ring), headers: Self.caller.kafkaHeaders), tracing: .off)
        #expect(event.trace == nil, "no tracer, no span")
        #expect(await h.processor.process(event) == .finished(.failed))
        #expect(h.publisher.statusHeaders.last?["traceparent"] == Self.caller.traceparent)
        #expect(h.publisher.deadLetters.last?.headers["traceparent"] == Self.caller.traceparent, "the DLQ record keeps the trace for a replay")
        #expect(h.publisher.deadLetters.last?.headers["tracestate"] == "vendor=1")

        let plain = makeRing(token: String(repeating: "d6", count: 32))
        #expect(await h.processor.process(InboundEvent(try message(.ring(plain), headers: []), tracing: .off)) == .finished(.sent))
        #expect(h.publisher.statusHeaders.last?.isEmpty == true, "nothing to pass on, nothing added")
    }

    @Test func anEventHandedBackBeforeItsDeliveryStillEndsItsSpan() async throws {
        let h = Harness()
        let ring = makeRing()
        let (spans, _) = try await traced { backend in
            let tracing = backend.tracing
            let event = InboundEvent(try message(.ring(ring), headers: Self.caller.kafkaHeaders), tracing: tracing)
            _ = h.processor.intake(event)
            // The event goes (stale, revoked) without being processed.
        }
        let process = try #require(spans.first { $0.name == SpanName.processEvent })
        #expect(process.attributes[SpanAttributeName.state] == "handed-back")
        #expect(spans.contains { $0.name == SpanName.decode && $0.parentSpanID == process.spanID })
    }

    @Test func aReplayedEventLinksToTheTraceOfTheDeliveryItReplays() async throws {
        let h = Harness()
        let ring = makeRing(replay: 1)
        let original = try #require(TraceParent(traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
        let (spans, _) = try await traced { backend in
            let tracing = backend.tracing
            let event = InboundEvent(try message(.ring(ring), headers: Self.caller.kafkaHeaders + [KafkaHeader(key: SpanName.linkHeader, string: original.traceparent)]),
                                     tracing: tracing)
            #expect(await h.processor.process(event) == .finished(.sent))
        }
        let process = try #require(spans.first { $0.name == SpanName.processEvent })
        #expect(process.links == [.init(traceID: original.traceID, spanID: original.spanID)])
        #expect(process.attributes[SpanAttributeName.replay] == "1")
    }

    @Test func anAndroidAttemptIsAnFCMPushSpanWithFCMsErrorCode() async throws {
        let h = Harness()
        let ring = makeAndroidRing()
        h.sender.script(ring.device.token, [.fcmUnregistered])
        let (spans, bodies) = try await traced { backend in
            let event = InboundEvent(try message(.ring(ring), headers: Self.caller.kafkaHeaders), tracing: backend.tracing)
            #expect(await h.processor.process(event) == .finished(.failed))
        }
        let process = try #require(spans.first { $0.name == SpanName.processEvent })
        #expect(process.attributes[SpanAttributeName.platform] == "android")
        #expect(!spans.contains { $0.name == SpanName.apnsPush })
        let attempt = try #require(spans.first { $0.name == SpanName.fcmPush })
        #expect(attempt.parentSpanID == process.spanID)
        #expect(attempt.attributes[SpanAttributeName.httpStatus] == "404")
        #expect(attempt.attributes[SpanAttributeName.fcmReason] == "UNREGISTERED")
        #expect(attempt.attributes[SpanAttributeName.apnsReason] == nil)
        #expect(bodies.allSatisfy { !$0.contains(ring.device.token) }, "the FCM token is in no exported span")
    }

    @Test func logLinesOfATracedDeliveryCarryItsTraceID() async throws {
        let lines = Locked<[String]>([])
        let ring = makeRing(token: String(repeating: "e7", count: 32))
        var logged: [String] = []
        let (spans, _) = try await traced { backend in
            var logger = Logger(label: "test", factory: { _ in ProvidedMetadataLogHandler(lines: lines) })
            logger.handler.metadataProvider = backend.metadataProvider
            let h = Harness(logger: logger)
            h.sender.script(ring.device.token, [.unavailable])
            let event = InboundEvent(try message(.ring(ring), headers: Self.caller.kafkaHeaders), tracing: backend.tracing)
            #expect(await h.processor.process(event) == .finished(.sent))
            logger.info("outside any span")
            logged = lines.withLock { $0 }
        }
        let process = try #require(spans.first { $0.name == SpanName.processEvent })
        let retried = try #require(logged.first { $0.hasPrefix("push will be retried") })
        #expect(retried.contains("trace_id=\(Self.caller.traceID)"), "\(retried)")
        #expect(retried.contains("span_id=\(process.spanID)"), "the line names the delivery's span")
        #expect(logged.first { $0.hasPrefix("push sent") }?.contains("trace_id=\(Self.caller.traceID)") == true)
        #expect(logged.last?.hasPrefix("outside any span") == true && logged.last?.contains("trace_id") == false, "no trace, no trace_id")
    }
}

/// Records each log line with its metadata, the provider's included (as swift-log's stream
/// handler writes it).
struct ProvidedMetadataLogHandler: LogHandler {
    let lines: Locked<[String]>
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(metadataProvider?.get() ?? [:]) { $1 }.merging(event.metadata ?? [:]) { $1 }
        lines.withLock { $0.append("\(event.message) \(all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))") }
    }
}
