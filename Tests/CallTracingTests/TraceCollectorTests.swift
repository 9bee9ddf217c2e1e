import CallTracing
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Logging
import ServiceLifecycle
import Testing
import Tracing

let quietLogger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

/// The local collector of `callpush dev`: OTLP/HTTP JSON in, a bounded store, spans of a call out.
@Suite struct TraceCollectorTests {
    static func span(_ trace: String, _ id: String, parent: String? = nil, call: String? = nil, start: UInt64,
                     links: [CollectedSpan.Link] = []) -> CollectedSpan {
        CollectedSpan(traceID: trace, spanID: id, parentSpanID: parent, name: "s-\(id)", kind: "internal", service: "test",
                      startNanoseconds: start, endNanoseconds: start + 10, attributes: call.map { [SpanAttributeName.callID: $0] } ?? [:],
                      links: links)
    }

    @Test func decodesOTLPJSONWithHexOrBase64IDs() throws {
        let body = #"""
        {"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"push-worker"}}]},
          "scopeSpans":[{"scope":{"name":"swift-otel"},"spans":[
            {"traceId":"S/kvNXezTaajzpKdDg5HNg==","spanId":"APBnqgupArc=","parentSpanId":"","name":"APNs push","kind":3,
             "startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000012000000",
             "attributes":[{"key":"http.response.status_code","value":{"intValue":"503"}},
                           {"key":"callpush.apns.reason","value":{"stringValue":"ServiceUnavailable"}},
                           {"key":"callpush.duplicate","value":{"boolValue":false}}],
             "status":{"code":2,"message":"ServiceUnavailable"},
             "links":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331"}]},
            {"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b7","name":"decode","kind":1,
             "startTimeUnixNano":1700000000000000001,"endTimeUnixNano":1700000000000000002}
          ]}]}]}
        """#
        let spans = try OTLPJSON.spans(from: Data(body.utf8))
        #expect(spans.count == 2)
        let push = spans[0]
        #expect(push.traceID == "4bf92f3577b34da6a3ce929d0e0e4736", "base64 bytes become hex")
        #expect(push.spanID == "00f067aa0ba902b7")
        #expect(push.parentSpanID == nil, "an empty parent id is a root")
        #expect(push.service == "push-worker")
        #expect(push.kind == "client")
        #expect(push.endNanoseconds - push.startNanoseconds == 12_000_000)
        #expect(push.attributes["http.response.status_code"] == "503")
        #expect(push.attributes["callpush.apns.reason"] == "ServiceUnavailable")
        #expect(push.attributes["callpush.duplicate"] == "false")
        #expect(push.error == "ServiceUnavailable")
        #expect(push.links == [.init(traceID: "0af7651916cd43dd8448eb211c80319c", spanID: "b7ad6b7169203331")])
        #expect(spans[1].traceID == "4bf92f3577b34da6a3ce929d0e0e4736" && spans[1].error == nil)
        #expect(throws: (any Error).self) { try OTLPJSON.spans(from: Data("[1,2]".utf8)) }
    }

    @Test func theStoreKeepsTheNewestSpansWithinItsCapacity() {
        let store = TraceStore(capacity: 3)
        store.add((0..<5).map { Self.span(String(repeating: "a", count: 31) + "\($0)", "000000000000000\($0)", call: "c", start: UInt64($0)) })
        #expect(store.count == 3)
        #expect(store.dropped == 2)
        #expect(store.spans(callID: "c").map(\.startNanoseconds) == [2, 3, 4], "the two oldest were forgotten")
    }

    @Test func aCallsSpansAreItsTracesAndTheTracesLinkedToThem() {
        let store = TraceStore()
        let original = String(repeating: "1", count: 32), replay = String(repeating: "2", count: 32), other = String(repeating: "3", count: 32)
        store.add([
            Self.span(original, "1000000000000001", call: "call-a", start: 10),
            Self.span(original, "1000000000000002", parent: "1000000000000001", start: 11), // no call id, same trace
            Self.span(replay, "2000000000000001", start: 50, links: [.init(traceID: original, spanID: "1000000000000002")]),
            Self.span(other, "3000000000000001", call: "call-b", start: 20),
        ])
        #expect(store.spans(callID: "call-a").map(\.spanID) == ["1000000000000001", "1000000000000002", "2000000000000001"])
        #expect(store.spans(callID: nil, traceIDs: [other]).map(\.spanID) == ["3000000000000001"])
        #expect(store.spans(callID: "unknown").isEmpty)
    }

    /// swift-otel's tracer, exporting to the collector over HTTP in either OTLP encoding: a span
    /// continues a caller's `traceparent`, and its own context is what goes on.
    @Test(arguments: [false, true])
    func aSpanContinuesTheCarriedContextAndArrivesAtTheCollector(json: Bool) async throws {
        let collector = TraceCollector(port: 0, logger: quietLogger)
        try await collector.start()
        let backend = try TracingEnvironment.makeBackend(serviceName: "test-service", tracesEndpoint: collector.tracesURL, json: json,
                                                         scheduleDelay: .milliseconds(50), logger: quietLogger)
        let group = ServiceGroup(services: [backend.service], logger: quietLogger)
        let running = Task { try await group.run() }

        let caller = try #require(TraceParent(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        let span = try #require(backend.tracing.startSpan("work", continuing: caller, kind: .server))
        span.attributes[SpanAttributeName.callID] = "call-1"
        let onward = try #require(backend.tracing.traceParent(of: span.context))
        #expect(onward.traceID == caller.traceID, "the caller's trace goes on")
        #expect(onward.spanID != caller.spanID)
        span.end()
        #expect(backend.tracing.startSpan("x", continuing: TraceParent(traceparent: "garbage")) != nil, "a bad context starts a new trace")

        var spans: [CollectedSpan] = []
        let deadline = ContinuousClock.now + .seconds(20)
        while spans.isEmpty, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            spans = collector.store.spans(callID: "call-1")
        }
        await group.triggerGracefulShutdown()
        _ = await running.result
        await collector.stop()
        let received = try #require(spans.first)
        #expect(received.traceID == caller.traceID)
        #expect(received.parentSpanID == caller.spanID)
        #expect(received.spanID == onward.spanID)
        #expect(received.service == "test-service")
        #expect(received.kind == "server")
        #expect(CallTracing.off.startSpan("x", continuing: caller) == nil, "off: no span")
        #expect(CallTracing.off.context(continuing: caller) == nil)
    }

    /// Whether a collector answers on `port` (a span query, 200).
    static func answers(on port: Int) async -> Bool {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/v1/spans?callId=c")!)
        request.timeoutInterval = 5
        guard let (_, response) = try? await URLSession.shared.data(for: request) else { return false }
        return (response as? HTTPURLResponse)?.statusCode == 200
    }

    /// `callpush dev` and the tests stop a collector and start it again: the second start listens
    /// anew instead of answering with the port of the stopped one.
    @Test func aStoppedCollectorStartsAgain() async throws {
        let collector = TraceCollector(port: 0, logger: quietLogger)
        let first = try await collector.start()
        #expect(await Self.answers(on: first))
        await collector.stop()
        #expect(collector.port == nil, "a stopped collector has no port")
        #expect(await !Self.answers(on: first))
        let second = try await collector.start()
        #expect(collector.port == second)
        #expect(await Self.answers(on: second), "the restarted collector listens")
        await collector.stop()
        await collector.stop()
        #expect(await !Self.answers(on: second))
    }

    /// Two starts at once bind one listener: both get its port, and one stop closes it.
    @Test func concurrentStartsBindOnce() async throws {
        let collector = TraceCollector(port: 0, logger: quietLogger)
        async let a = collector.start()
        async let b = collector.start()
        let (portA, portB) = try await (a, b)
        #expect(portA == portB, "one listener")
        await collector.stop()
        #expect(await !Self.answers(on: portA))
        #expect(await !Self.answers(on: portB), "no second listener left running")
    }
}
