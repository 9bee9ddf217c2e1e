import CallTracing
import CallpushTestSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// The local collector's reader of OTLP binary protobuf (what `callpush dev` exports). swift-otel's
/// own encoder is checked against it in `TraceCollectorTests`; these bodies are written by hand to
/// reach every field kind, unknown fields and malformed input.
@Suite struct OTLPProtobufTests {
    /// A protobuf writer for test bodies: field keys, varints, fixed64 and length-delimited parts.
    struct Message {
        var bytes: [UInt8] = []

        static func varintBytes(_ value: UInt64) -> [UInt8] {
            var value = value, out: [UInt8] = []
            while value >= 0x80 {
                out.append(UInt8(value & 0x7f) | 0x80)
                value >>= 7
            }
            return out + [UInt8(value)]
        }

        mutating func key(_ number: UInt64, _ wireType: UInt64) { bytes += Self.varintBytes(number << 3 | wireType) }
        mutating func varint(_ number: UInt64, _ value: UInt64) { key(number, 0); bytes += Self.varintBytes(value) }
        mutating func fixed64(_ number: UInt64, _ value: UInt64) { key(number, 1); bytes += (0..<8).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
        mutating func fixed32(_ number: UInt64, _ value: UInt32) { key(number, 5); bytes += (0..<4).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
        mutating func bytes(_ number: UInt64, _ value: [UInt8]) { key(number, 2); bytes += Self.varintBytes(UInt64(value.count)) + value }
        mutating func string(_ number: UInt64, _ value: String) { bytes(number, Array(value.utf8)) }
        mutating func message(_ number: UInt64, _ build: (inout Message) -> Void) {
            var nested = Message()
            build(&nested)
            bytes(number, nested.bytes)
        }
    }

    static func hexBytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = [], digits = Array(hex.utf8)[...]
        while !digits.isEmpty { out.append(UInt8(String(decoding: digits.prefix(2), as: UTF8.self), radix: 16)!); digits = digits.dropFirst(2) }
        return out
    }

    static func attribute(_ message: inout Message, _ number: UInt64, key: String, value: @escaping (inout Message) -> Void) {
        message.message(number) { keyValue in
            keyValue.string(1, key)
            keyValue.message(2, value)
        }
    }

    /// One export with a resource, a scope and two spans: every field `callpush status --trace`
    /// shows, each attribute value kind, and fields this reader does not know (skipped).
    static var export: [UInt8] {
        var request = Message()
        request.message(1) { resourceSpans in
            resourceSpans.message(1) { resource in
                attribute(&resource, 1, key: "host.name") { $0.string(1, "dev") }
                attribute(&resource, 1, key: "service.name") { $0.string(1, "push-worker") }
                resource.varint(2, 0)  // dropped_attributes_count
            }
            resourceSpans.message(2) { scope in
                scope.message(1) { $0.string(1, "swift-otel") }
                scope.message(2) { span in
                    span.bytes(1, hexBytes("4bf92f3577b34da6a3ce929d0e0e4736"))
                    span.bytes(2, hexBytes("00f067aa0ba902b7"))
                    span.string(3, "vendor=x")  // trace_state
                    span.bytes(4, hexBytes("a3ce929d0e0e4736"))
                    span.string(5, "APNs push")
                    span.varint(6, 3)
                    span.fixed64(7, 1_700_000_000_000_000_000)
                    span.fixed64(8, 1_700_000_000_012_000_000)
                    attribute(&span, 9, key: "http.response.status_code") { $0.varint(3, 503) }
                    attribute(&span, 9, key: "callpush.apns.reason") { $0.string(1, "ServiceUnavailable") }
                    attribute(&span, 9, key: "callpush.duplicate") { $0.varint(2, 0) }
                    attribute(&span, 9, key: "callpush.delay") { $0.fixed64(4, (1.5).bitPattern) }
                    attribute(&span, 9, key: "callpush.negative") { $0.varint(3, UInt64(bitPattern: -7)) }
                    attribute(&span, 9, key: "callpush.attempts") { value in
                        value.message(5) { array in
                            array.message(1) { $0.varint(3, 1) }
                            array.message(1) { $0.string(1, "two") }
                        }
                    }
                    attribute(&span, 9, key: "callpush.raw") { $0.bytes(7, [1, 2]) }
                    span.varint(10, 0)  // dropped_attributes_count
                    span.message(11) { event in event.string(2, "retry") }  // events
                    span.message(13) { link in
                        link.bytes(1, hexBytes("0af7651916cd43dd8448eb211c80319c"))
                        link.bytes(2, hexBytes("b7ad6b7169203331"))
                        link.string(3, "")
                    }
                    span.message(15) { status in
                        status.string(2, "ServiceUnavailable")
                        status.varint(3, 2)
                    }
                    span.fixed32(16, 0x101)  // flags
                }
                scope.message(2) { span in
                    span.bytes(1, hexBytes("4bf92f3577b34da6a3ce929d0e0e4736"))
                    span.bytes(2, hexBytes("1111111111111111"))
                    span.string(5, "decode")
                    span.message(15) { $0.varint(3, 1) }  // ok
                }
                scope.message(2) { span in  // no span id: not kept
                    span.bytes(1, hexBytes("4bf92f3577b34da6a3ce929d0e0e4736"))
                    span.string(5, "broken")
                }
            }
            resourceSpans.string(3, "https://opentelemetry.io/schemas/1.21.0")
        }
        return request.bytes
    }

    @Test func readsEveryFieldTheCollectorKeeps() throws {
        let spans = try OTLPProtobuf.spans(from: Self.export)
        #expect(spans.count == 2, "the span without an id is left out")
        let push = spans[0]
        #expect(push.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(push.spanID == "00f067aa0ba902b7")
        #expect(push.parentSpanID == "a3ce929d0e0e4736")
        #expect(push.name == "APNs push")
        #expect(push.kind == "client")
        #expect(push.service == "push-worker", "service.name, not the first resource attribute")
        #expect(push.startNanoseconds == 1_700_000_000_000_000_000)
        #expect(push.endNanoseconds - push.startNanoseconds == 12_000_000)
        #expect(push.attributes == [
            "http.response.status_code": "503", "callpush.apns.reason": "ServiceUnavailable", "callpush.duplicate": "false",
            "callpush.delay": "1.5", "callpush.negative": "-7", "callpush.attempts": "[1, two]", "callpush.raw": "",
        ])
        #expect(push.error == "ServiceUnavailable")
        #expect(push.links == [.init(traceID: "0af7651916cd43dd8448eb211c80319c", spanID: "b7ad6b7169203331")])
        let decode = spans[1]
        #expect(decode.parentSpanID == nil && decode.kind == "internal" && decode.error == nil)
        #expect(decode.attributes.isEmpty && decode.links.isEmpty)
    }

    /// The same export in OTLP's JSON encoding decodes to the same spans.
    @Test func protobufAndJSONGiveTheSameSpans() throws {
        let json = #"""
        {"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"push-worker"}}]},
          "scopeSpans":[{"spans":[
            {"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b7","parentSpanId":"a3ce929d0e0e4736",
             "name":"APNs push","kind":3,"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000012000000",
             "attributes":[{"key":"http.response.status_code","value":{"intValue":"503"}},
                           {"key":"callpush.apns.reason","value":{"stringValue":"ServiceUnavailable"}},
                           {"key":"callpush.duplicate","value":{"boolValue":false}},
                           {"key":"callpush.delay","value":{"doubleValue":1.5}},
                           {"key":"callpush.negative","value":{"intValue":"-7"}},
                           {"key":"callpush.attempts","value":{"arrayValue":{"values":[{"intValue":"1"},{"stringValue":"two"}]}}},
                           {"key":"callpush.raw","value":{"bytesValue":"AQI="}}],
             "status":{"code":2,"message":"ServiceUnavailable"},
             "links":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331"}]},
            {"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"1111111111111111","name":"decode","status":{"code":1}}
          ]}]}]}
        """#
        #expect(try OTLPProtobuf.spans(from: Self.export) == OTLPJSON.spans(from: Data(json.utf8)))
    }

    @Test func anEmptyExportHasNoSpans() throws {
        #expect(try OTLPProtobuf.spans(from: []).isEmpty)
    }

    /// Malformed bodies are errors, whatever is wrong and wherever the body ends.
    @Test func malformedBodiesAreErrorsNotCrashes() throws {
        var wrongType = Message()
        wrongType.message(1) { $0.message(2) { $0.message(2) { span in span.varint(1, 5) } } }  // trace_id as a varint
        var group = Message()
        group.key(7, 3)  // start group: not in proto3
        group.bytes += [0, 0, 0, 0]
        var longVarint = Message()
        longVarint.key(1, 0)
        longVarint.bytes += [UInt8](repeating: 0xff, count: 10) + [0x01]
        var pastEnd = Message()
        pastEnd.key(1, 2)
        pastEnd.bytes += Message.varintBytes(100) + [1, 2, 3]
        var fieldZero = Message()
        fieldZero.varint(0, 1)
        var nested = Message()
        nested.message(1) { $0.message(2) { $0.message(2) { span in
            Self.attribute(&span, 9, key: "deep") { value in
                func array(_ message: inout Message, _ depth: Int) {
                    message.message(5) { values in values.message(1) { if depth > 0 { array(&$0, depth - 1) } else { $0.string(1, "x") } } }
                }
                array(&value, 20)
            }
        } } }
        for (name, body) in [("wrong wire type", wrongType.bytes), ("group", group.bytes), ("11-byte varint", longVarint.bytes),
                             ("length past the end", pastEnd.bytes), ("field 0", fieldZero.bytes), ("arrays 21 deep", nested.bytes)] {
            #expect(throws: OTLPProtobuf.Malformed.self, "\(name)") { try OTLPProtobuf.spans(from: body) }
        }
        // Every cut of a valid export either decodes (a cut between fields is a shorter message) or is an error.
        let export = Self.export
        var errors = 0
        for end in 0..<export.count {
            do { _ = try OTLPProtobuf.spans(from: Array(export[..<end])) } catch { errors += 1 }
        }
        #expect(errors > export.count / 2, "most cuts fall inside a field")
    }

    /// Random damage to a valid export (bytes changed, inserted, removed; a fixed seed, so a
    /// failure repeats): every body decodes or is an error — a trap would end the test run.
    @Test func damagedBodiesDecodeOrFail() {
        var generator = SplitMix(state: 0x5eed_0715)
        let export = Self.export
        var decoded = 0, failed = 0
        for _ in 0..<20_000 {
            var body = export
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: 0..<body.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: body[index] = UInt8.random(in: 0...255, using: &generator)
                case 1: body.insert(UInt8.random(in: 0...255, using: &generator), at: index)
                default: if body.count > 1 { body.remove(at: index) }
                }
            }
            do { _ = try OTLPProtobuf.spans(from: body); decoded += 1 } catch { failed += 1 }
        }
        #expect(decoded > 0 && failed > 0, "the damage reaches both outcomes (\(decoded) decoded, \(failed) refused)")
    }

    /// The collector answers a protobuf export in protobuf (an empty response message), and turns
    /// away other media types and compressed bodies it cannot read.
    @Test func theCollectorTakesProtobufAndJSON() async throws {
        let collector = TraceCollector(port: 0, logger: quietLogger)
        try await collector.start()
        func post(_ body: [UInt8], _ headers: [String: String]) async throws -> (Int, String?, Data) {
            var request = URLRequest(url: URL(string: collector.tracesURL!)!)
            request.httpMethod = "POST"
            request.httpBody = Data(body)
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            let (data, response) = try await URLSession.shared.data(for: request)
            let http = response as! HTTPURLResponse
            return (http.statusCode, http.value(forHTTPHeaderField: "Content-Type"), data)
        }
        let accepted = try await post(Self.export, ["Content-Type": "application/x-protobuf"])
        #expect(accepted.0 == 200 && accepted.1 == "application/x-protobuf" && accepted.2.isEmpty)
        #expect(collector.store.spans(callID: nil, traceIDs: ["4bf92f3577b34da6a3ce929d0e0e4736"]).count == 2)
        #expect(try await post([0x0a, 0x05, 0x01], ["Content-Type": "application/x-protobuf"]).0 == 400)
        #expect(try await post(Self.export, ["Content-Type": "text/plain"]).0 == 415)
        #expect(try await post(Self.export, ["Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"]).0 == 415)
        let json = try await post(Array(#"{"resourceSpans":[]}"#.utf8), ["Content-Type": "application/json"])
        #expect(json.0 == 200 && json.1 == "application/json" && json.2 == Data("{}".utf8))
        await collector.stop()
    }
}
