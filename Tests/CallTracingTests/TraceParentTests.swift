import CallTracing
import Kafka
import Testing

/// W3C trace context as callpush reads it from outside (callers' HTTP headers, any producer's records).
@Suite struct TraceParentTests {
    static let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test func aWellFormedTraceparentIsKeptWithItsIDs() throws {
        let parent = try #require(TraceParent(traceparent: Self.valid, tracestate: "congo=t61rcWkgMzE"))
        #expect(parent.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(parent.spanID == "00f067aa0ba902b7")
        #expect(parent.tracestate == "congo=t61rcWkgMzE")
        #expect(parent.headerPairs.map(\.0) == ["traceparent", "tracestate"])
    }

    @Test(arguments: [
        "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", // too short
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero parent id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // forbidden version
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", // version 00 has no more fields
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
    ])
    func aMalformedTraceparentIsIgnored(value: String) {
        #expect(TraceParent(traceparent: value) == nil)
    }

    @Test func aLaterVersionIsReadByTheLayoutOfVersionZero() {
        #expect(TraceParent(traceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future") != nil)
        #expect(TraceParent(traceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x") == nil)
    }

    @Test func anOversizedOrUnprintableTracestateIsDroppedButTheParentKept() throws {
        let long = String(repeating: "k=v,", count: 200)
        #expect(try #require(TraceParent(traceparent: Self.valid, tracestate: long)).tracestate == nil)
        #expect(try #require(TraceParent(traceparent: Self.valid, tracestate: "a=\u{7}b")).tracestate == nil)
        #expect(try #require(TraceParent(traceparent: Self.valid, tracestate: "a=é")).tracestate == nil)
    }

    @Test func kafkaHeadersCarryTheContextBothWays() throws {
        let parent = try #require(TraceParent(traceparent: Self.valid, tracestate: "a=1"))
        let headers = [KafkaHeader(key: "callpush-origin", string: "x/y")] + parent.kafkaHeaders
        #expect(TraceParent(kafkaHeaders: headers) == parent)
        #expect(TraceParent(kafkaHeaders: [KafkaHeader(key: "callpush-origin", string: "x/y")]) == nil)
        #expect(TraceParent(kafkaHeaders: [KafkaHeader(key: "traceparent", value: nil)]) == nil)
        #expect(TraceParent(kafkaHeaders: [KafkaHeader(key: "traceparent", value: [0xFF, 0xFE])]) == nil)
    }
}
