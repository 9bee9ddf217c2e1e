import CallContract
import CallpushTestSupport
import CallTracing
import Foundation
import Kafka
import Logging
import Testing
@testable import CallpushCLI

/// `callpush dev` keeps the spans of every call; `callpush status <callId> --trace` shows them as
/// a timeline; `callpush replay` keeps the link to the replayed delivery's trace.
@Suite(.serialized) struct Traces {
    @Test func aCallRungThroughDevIsShownAsATimelineByStatusTrace() async throws {
        var options = DevStack.Options(brokers: 1, partitions: 2, workers: 1, dispatchPort: 0)
        options.traces = .local(port: 0)
        let stack = try await DevStack.start(options, logger: DevMode.logger)
        try await withRunning(stack.services, logger: DevMode.logger) {
            let state = try await stack.ready()
            let traceURL = try #require(state.traceURL, "dev serves its traces")
            #expect(DevStack.banner(state).contains(traceURL))
            let http = HTTPExchange(baseURL: try #require(URL(string: state.dispatchURL)), timeout: .seconds(10))
            let token = String(repeating: "7c", count: 32)
            let body = #"{"app":"\#(state.app)","devices":[{"token":"\#(token)","environment":"sandbox"}],"caller":{"handle":"driver-1"}}"#
            let answer = try await http.send(.POST, "/v1/calls", headers: [("Authorization", "Bearer \(state.apiKey)"), ("Content-Type", "application/json")],
                                             body: Array(body.utf8))
            #expect(answer.status == 202)
            let callId = try #require((try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["callId"] as? String)

            // The worker's spans arrive once the delivery ended (batched for at most 100 ms).
            let deadline = ContinuousClock.now + .seconds(30)
            while !(stack.collector?.store.spans(callID: callId).contains { $0.name == SpanName.writeStatus } ?? false), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            let output = CapturedOutput()
            let command = try parse(StatusCommand.self, ["status", callId, "--trace", "--trace-url", traceURL, "--bootstrap", state.bootstrapServers])
            let count = try await command.reader(environment: [:], output: output.output).run()
            #expect(count >= 1)
            let lines = output.out
            let header = try #require(lines.firstIndex { $0.hasPrefix("trace ") }, "a timeline follows the statuses: \(lines)")
            let timeline = lines[header...].joined(separator: "\n")
            for name in [SpanName.ring, SpanName.publishEvents, SpanName.processEvent, SpanName.apnsPush, SpanName.writeStatus] {
                #expect(timeline.contains(name), "\(name) in\n\(timeline)")
            }
            #expect(timeline.contains("dispatch") && timeline.contains("push-worker"), "each span names its service")
            #expect(timeline.contains("status=200"), "the APNs answer is shown")
            #expect(!timeline.contains(token), "never the device token")
            let process = try #require(lines.first { $0.contains(SpanName.processEvent) })
            let push = try #require(lines.first { $0.contains(SpanName.apnsPush) })
            func indent(_ line: String) -> Int { line.dropFirst(35).prefix { $0 == " " }.count }
            #expect(indent(push) > indent(process), "children are indented under their parent")
        }
    }

    @Test func statusTraceWithoutACollectorSaysSoAndPrintsTheTraceIDs() async throws {
        let bed = try CLITestbed.start()
        let callId = CallID.make()
        let parent = try #require(TraceParent(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        let status = CallStatus(callId: callId, deviceKey: "k", app: "rider", state: .sent, attempt: 1, replay: 0,
                                at: ContractCoding.truncatedToMilliseconds(Date()), worker: "w")
        try await bed.produce([KafkaProducerRecord(topic: bed.topics.status, partition: 0, key: Array(callId.utf8), value: Array(try status.encoded()),
                                                   headers: parent.kafkaHeaders)])
        let output = CapturedOutput()
        let count = try await parse(StatusCommand.self, ["status", callId, "--trace", "--trace-url", "http://127.0.0.1:9"] + bed.flags)
            .reader(environment: [:], output: output.output).run()
        #expect(count == 1)
        #expect(output.error.contains { $0.contains("cannot read spans") && $0.contains(parent.traceID) }, "\(output.error)")
        await bed.stop()
    }

    @Test func badTraceURLsAreRefused() {
        #expect(throws: (any Error).self) { try parse(StatusCommand.self, ["status", CallID.make(), "--trace", "--trace-url", "localhost:4318"]) }
    }

    @Test func replayKeepsTheLinkToTheOriginalTrace() async throws {
        let bed = try CLITestbed.start()
        let ring = CLITestbed.ring()
        let original = try #require(TraceParent(traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
        var record = try bed.deadLetter(ring, error: "Unregistered")
        record.headers += original.kafkaHeaders
        try await bed.produce([record, try bed.deadLetter(CLITestbed.ring(), error: "Unregistered")])
        let summary = try await parse(ReplayCommand.self, ["replay"] + bed.flags).runner(environment: [:], output: CapturedOutput().output).run()
        #expect(summary.counts.replayed == 2)
        let replayed = try await bed.readAll(bed.topics.requests, partitions: 2)
        let linked = try #require(replayed.first { $0.keyString == ring.callId })
        #expect(linked.header(SpanName.linkHeader)?.stringValue == original.traceparent, "the worker links its span to this")
        #expect(TraceParent(kafkaHeaders: linked.headers) == nil, "a new trace, not a child of a days-old one (the CLI does not trace here)")
        #expect(replayed.first { $0.keyString != ring.callId }?.header(SpanName.linkHeader) == nil, "nothing to link, no header")
        await bed.stop()
    }

    @Test func theTimelineIndentsChildrenAndPlacesBarsOnTheTracesTimeAxis() {
        let trace = String(repeating: "a", count: 32)
        let spans = [
            CollectedSpan(traceID: trace, spanID: "0000000000000001", parentSpanID: "ffffffffffffffff", name: "POST /v1/calls", kind: "server",
                          service: "dispatch", startNanoseconds: 1_000_000_000, endNanoseconds: 1_100_000_000,
                          attributes: [SpanAttributeName.callID: "c-1", SpanAttributeName.httpStatus: "202"]),
            CollectedSpan(traceID: trace, spanID: "0000000000000002", parentSpanID: "0000000000000001", name: "APNs push", kind: "client",
                          service: "push-worker", startNanoseconds: 1_050_000_000, endNanoseconds: 1_100_000_000,
                          attributes: [SpanAttributeName.httpStatus: "503", SpanAttributeName.apnsReason: "ServiceUnavailable"],
                          error: "ServiceUnavailable"),
        ]
        let lines = TraceTimeline.render(spans)
        #expect(lines[0].hasPrefix("trace \(trace)  2 spans, 100.0 ms"))
        let root = try! #require(lines.first { $0.contains("POST /v1/calls") })
        let child = try! #require(lines.first { $0.contains("APNs push") })
        #expect(root.hasPrefix("+0.00 ms") && root.contains("100.0 ms") && root.contains("call=c-1 status=202"))
        #expect(child.hasPrefix("+50.0 ms") && child.contains("  APNs push"), "indented under its parent")
        #expect(child.contains("status=503 reason=ServiceUnavailable ERROR ServiceUnavailable"))
        let bar = { (line: String) in line.split(separator: "|")[1] }
        #expect(bar(root).allSatisfy { $0 == "█" }, "the root spans the whole axis")
        #expect(bar(child).prefix(16).allSatisfy { $0 == " " } && bar(child).suffix(16).allSatisfy { $0 == "█" }, "the child its second half")
    }
}
