import Foundation
import Testing
@testable import CallContract

/// The fast ring decoder in front of `JSONDecoder` (`CallRequest.fastRing`) may only ever accept
/// what the decoder accepts, as the same value; everything else it leaves to the decoder.
@Suite struct FastJSONTests {
    typealias Generator = ContractJSONWriterTests.Generator

    static func slow(_ data: Data) -> CallRequest? { try? ContractCoding.decode(CallRequest.self, from: data) }

    static let typical = RingRequest(
        callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", app: "rider",
        device: Device(token: String(repeating: "ab", count: 32), environment: .sandbox, id: "dev-1"),
        caller: Caller(handle: "driver-1234", displayName: "Driver Tanaka"), hasVideo: true,
        requestedAt: Date(timeIntervalSince1970: 1_795_262_400.012), ringDeadline: Date(timeIntervalSince1970: 1_795_262_430.012),
        maxDurationSeconds: 3600, attributes: ["rideId": "R-829", "url": "https://example.com/r/1"], replay: 2)

    @Test func aTypicalRingTakesTheFastPathAndMatchesTheDecoder() throws {
        let data = try CallRequest.ring(Self.typical).encoded()
        let fast = try #require(CallRequest.fastRing(data), "the common case must not fall back")
        #expect(fast == Self.typical)
        #expect(Self.slow(data) == .ring(fast))
    }

    @Test func anEventsBytesDecodeAsTheSameDataDoes() throws {
        let typical = Array(try CallRequest.ring(Self.typical).encoded())
        #expect(try CallRequest.decode(typical) == .ring(Self.typical))
        // Left to the decoder (a member it does not know) and refused by it: the same answer either way.
        var withUnknown = String(decoding: typical, as: UTF8.self)
        withUnknown.insert(contentsOf: #""extra":1,"#, at: withUnknown.index(after: withUnknown.startIndex))
        #expect(CallRequest.fastRing(Data(withUnknown.utf8)) == nil)
        func outcome(_ decode: () throws(ContractError) -> CallRequest) -> String {
            do throws(ContractError) { return "\(try decode())" } catch { return "\(error.code) \(error.path)" }
        }
        for document in [withUnknown, "{not json", #"{"type":"cancel","callId":"c-1","requestedAt":"2026-11-27T06:00:00Z"}"#] {
            let bytes = Array(document.utf8)
            #expect(outcome { () throws(ContractError) in try CallRequest.decode(bytes) }
                    == outcome { () throws(ContractError) in try CallRequest.decode(Data(bytes)) }, "\(document)")
        }
    }

    /// Generated rings (hostile strings, out-of-range numbers) and random mutations of their
    /// bytes: whenever the fast path returns a ring, the decoder returns the same one.
    @Test func whatTheFastPathAcceptsTheDecoderAcceptsAsEqual() throws {
        let fastCount = try Self.mutatedDocuments(fast: CallRequest.fastRing, slow: { data -> RingRequest? in
            if case .ring(let ring)? = Self.slow(data) { ring } else { nil }
        }) { g in
            var ring = ContractJSONWriterTests().ring(&g)
            if g.bool() { ring = Self.typical }
            return try CallRequest.ring(ring).encoded()
        }
        #expect(fastCount > 300, "the fast path is exercised")
    }

    /// 300 generated documents and 29 random mutations of each: whenever `fast` returns a value,
    /// `slow` (the decoder) returns the same one. Returns how many `fast` took.
    static func mutatedDocuments<Value: Equatable>(fast: (Data) -> Value?, slow: (Data) -> Value?,
                                                   _ document: (inout Generator) throws -> Data) rethrows -> Int {
        var fastCount = 0
        for seed in 1...300 as ClosedRange<UInt64> {
            var g = Generator(state: seed)
            let original = Array(try document(&g))
            for round in 0..<30 {
                var bytes = original
                if round > 0 { g.mutate(&bytes) }
                let data = Data(bytes)
                guard let value = fast(data) else { continue }
                fastCount += 1
                #expect(slow(data) == value, "seed \(seed) round \(round): \(String(decoding: data, as: UTF8.self))")
            }
        }
        return fastCount
    }

    /// A status as a worker writes it takes the fast status path and matches the decoder.
    @Test func aWorkerWrittenStatusTakesTheFastPath() throws {
        let status = CallStatus(
            callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: String(repeating: "c", count: 64), app: "rider", state: .sent,
            attempt: 1, replay: 2, at: Date(timeIntervalSince1970: 1_795_262_400.012),
            apns: .init(id: "7c3b5e1a-3f0e-4c8e-9a7b-2d1e0f9c8b7a", status: 200), worker: "push-worker-1", tenant: "taxi")
        let data = try status.encoded()
        let fast = try #require(CallStatus.fastStatus(data), "a worker's status must not fall back")
        #expect(fast == status)
        #expect(try ContractCoding.decode(CallStatus.self, from: data) == fast)
    }

    /// Generated statuses and random mutations of their bytes: whenever the fast status path
    /// returns a status, the decoder returns the same one.
    @Test func whatTheFastStatusPathAcceptsTheDecoderAcceptsAsEqual() throws {
        let fastCount = try Self.mutatedDocuments(fast: CallStatus.fastStatus, slow: { try? ContractCoding.decode(CallStatus.self, from: $0) }) { g in
            try ContractJSONWriterTests().status(&g).encoded()
        }
        #expect(fastCount > 300, "the fast path is exercised (\(fastCount))")
    }

    /// A ring as a Python producer writes it (`json.dumps`: `", "` / `": "` separators, member
    /// order of its own, `\uXXXX` for non-ASCII, `null` for absent fields, `isoformat()`
    /// timestamps with microseconds and `+00:00`) takes the fast path and matches the decoder.
    @Test func aThirdPartyFormattedRingTakesTheFastPath() throws {
        let text = #"""
            {"type": "ring", "callId": "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", "requestedAt": "2026-11-21T12:00:00.012345+00:00", \#
            "ringDeadline": "2026-11-21T12:00:30.012987+00:00", "app": "rider", "caller": {"handle": "driver-1234", \#
            "displayName": "Zo\u00eb \u00c5ngstr\u00f6m \ud83d\ude95 \"the\" \\\/ driver", "handleType": "generic"}, \#
            "device": {"environment": "sandbox", "token": "\#(String(repeating: "ab", count: 32))", "id": "dev-1"}, \#
            "hasVideo": false, "maxDurationSeconds": 3600, "attributes": {"rideId": "R-829", "zone": "n\u00f8rth"}, \#
            "replay": 0, "tenant": null}
            """#
        let data = Data(text.utf8)
        let fast = try #require(CallRequest.fastRing(data), "a third-party-formatted ring must not fall back")
        #expect(Self.slow(data) == .ring(fast))
        #expect(fast.caller.displayName == #"Zoë Ångström 🚕 "the" \/ driver"#)
        #expect(fast.attributes["zone"] == "nørth")
        #expect(fast.requestedAt == Date(timeIntervalSince1970: 1_795_262_400.012))
        #expect(fast.ringDeadline == Date(timeIntervalSince1970: 1_795_262_430.013))
    }

    /// The one-pass reader's structure rules, case by case: each member at most once at every
    /// level, only the contract's members, `null` only where the decoder reads it as absent, any
    /// whitespace, and timestamps written with escapes. Those it takes match the decoder; the
    /// others are left to the decoder, which decides.
    @Test func membersAreReadOnceEachWithTheDecodersRules() throws {
        let token = String(repeating: "ab", count: 32)
        func ring(_ members: String = "", device: String = #""environment":"sandbox","token":"\#(token)""#,
                  caller: String = #""handle":"driver-1""#) -> String {
            #"{"type":"ring","callId":"1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b","app":"rider","requestedAt":"2026-11-21T12:00:00.000Z","#
                + #""ringDeadline":"2026-11-21T12:00:30.000Z","device":{\#(device)},"caller":{\#(caller)}\#(members)}"#
        }
        let taken: [(String, String)] = [
            ("plain", ring()),
            ("nulls for every optional member", ring(#","hasVideo":null,"maxDurationSeconds":null,"attributes":null,"replay":null,"tenant":null"#,
                                                      device: #""environment":"sandbox","token":"\#(token)","id":null,"platform":null"#,
                                                      caller: #""handle":"h","handleType":null,"displayName":null"#)),
            ("whitespace everywhere", " \n\t" + ring(#" , "attributes" : { "a" : "b" , "c" : "" } , "hasVideo" : true "#,
                                                         device: #" "token" : "\#(token)" , "environment" : "sandbox" "#,
                                                         caller: #" "handle" : "h" "#) + " \r\n"),
            ("a timestamp written with escapes", ring().replacingOccurrences(of: "12:00:30.000Z", with: #"12:00:30.000\u005a"#)),
            ("an Android device", ring(device: #""platform":"android","token":"fcm:token-1""#)),
        ]
        for (name, text) in taken {
            let data = Data(text.utf8)
            let fast = try #require(CallRequest.fastRing(data), "\(name): must take the fast path")
            #expect(Self.slow(data) == .ring(fast), "\(name)")
        }
        let left: [(String, String)] = [
            ("a duplicate member", ring(#","app":"rider""#)),
            ("a duplicate device member", ring(device: #""environment":"sandbox","token":"\#(token)","token":"\#(token)""#)),
            ("a duplicate caller member", ring(caller: #""handle":"a","handle":"b""#)),
            ("a duplicate attribute", ring(#","attributes":{"a":"1","a":"2"}"#)),
            ("an unknown member", ring(#","extra":1"#)),
            ("an unknown device member", ring(device: #""environment":"sandbox","token":"\#(token)","x":"y""#)),
            ("an unknown caller member", ring(caller: #""handle":"h","nick":"n""#)),
            ("a null required member", ring().replacingOccurrences(of: #""app":"rider""#, with: #""app":null"#)),
            ("a null token", ring(device: #""environment":"sandbox","token":null"#)),
            ("a null device", ring().replacingOccurrences(of: #""device":{"environment":"sandbox","token":"\#(token)"}"#, with: #""device":null"#)),
            ("an empty caller", ring(caller: "")),
            ("a number where a string goes", ring(#","tenant":7"#)),
            ("a string where a number goes", ring(#","replay":"1""#)),
            ("an attribute that is not a string", ring(#","attributes":{"a":1}"#)),
            ("an escaped key", ring(#","h\u0061sVideo":true"#)),
            ("a cancel", ring().replacingOccurrences(of: #""type":"ring""#, with: #""type":"cancel""#)),
            ("trailing bytes", ring() + " x"),
            ("no type", ring().replacingOccurrences(of: #""type":"ring","#, with: "")),
        ]
        for (name, text) in left {
            let data = Data(text.utf8)
            #expect(CallRequest.fastRing(data) == nil, "\(name): must be left to the decoder")
        }
        // The decoder decides those: it refuses some, and takes a duplicate's last value.
        #expect(Self.slow(Data(ring(#","app":"rider""#).utf8)) != nil)
        #expect(Self.slow(Data(ring(device: #""environment":"sandbox","token":null"#).utf8)) == nil)
        #expect(Self.slow(Data(ring(#","replay":"1""#).utf8)) == nil)
    }

    /// A timestamp the fast computation leaves to Foundation (within 2 µs of half a millisecond,
    /// about 1 % of microsecond timestamps) costs that one field's parse, not the document's:
    /// the ring still takes the fast path, as the decoder's value.
    @Test func aTimestampAtTheHalfMillisecondEdgeKeepsTheRingOnTheFastPath() throws {
        let edge = "2026-11-21T12:00:00.012500+00:00"
        #expect(FastJSON.timestamp(edge) == nil, "the edge is Foundation's to decide")
        let text = #"""
            {"type": "ring", "callId": "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", "requestedAt": "\#(edge)", \#
            "ringDeadline": "2026-11-21T12:00:30.0125+00:00", "app": "rider", "caller": {"handle": "driver-1234"}, \#
            "device": {"environment": "sandbox", "token": "\#(String(repeating: "ab", count: 32))"}, "replay": 0}
            """#
        let data = Data(text.utf8)
        let fast = try #require(CallRequest.fastRing(data), "one edge timestamp must not send the whole ring to JSONDecoder")
        #expect(Self.slow(data) == .ring(fast))
        #expect(fast.requestedAt == ContractCoding.parseTimestamp(edge))
        // Not a timestamp at all: still the decoder's, which names the field.
        let bad = Data(text.replacingOccurrences(of: edge, with: "2026-11-21T12:00:00.0125+25:00").utf8)
        #expect(CallRequest.fastRing(bad) == nil)
    }

    /// Strings with every escape, control characters (escaped and raw), lone and paired
    /// surrogates, raw UTF-8 and invalid UTF-8 in each string field: whenever the fast path
    /// accepts, the decoder accepts the same ring; control characters always go to the decoder.
    @Test func escapedAndUnicodeStringsMatchTheDecoder() throws {
        let pieces = [#"\""#, #"\\"#, #"\/"#, #"\b"#, #"\f"#, #"\n"#, #"\r"#, #"\t"#, #"\u0000"#, #"\u001f"#, #"\u007f"#, #"\u0085"#,
                      #"\u009f"#, #"\u00a0"#, #"\u00E9"#, #"\u2028"#, #"\ud83d\ude95"#, #"\ud83d"#, #"\ude95"#, #"\ud83dx"#, #"\u12"#,
                      #"\x"#, "é", "漢", "a", " "].map { Array($0.utf8) } + [[0xC3], [0xFF], [0xC2, 0x85], [0x01], [0x7F]]
        let template = #"""
            {"type":"ring","callId":"1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b","app":"rider","requestedAt":"2026-11-21T12:00:00.000Z",\#
            "ringDeadline":"2026-11-21T12:00:30.000Z","caller":{"handle":"~","displayName":"^"},\#
            "device":{"token":"\#(String(repeating: "ab", count: 32))","environment":"sandbox","id":"|"},"attributes":{"k":"`"}}
            """#
        // Escapes and UTF-8 that hold no control character: these must take the fast path.
        let valid = [#"\""#, #"\\"#, #"\/"#, #"\u00a0"#, #"\u00E9"#, #"\u2028"#, #"\ud83d\ude95"#, "é", "漢", "a", " "].map { Array($0.utf8) }
        var g = Generator(state: 11)
        var fastCount = 0
        for round in 0..<1_500 {
            var text = Array(template.utf8)
            let field = [UInt8(ascii: "~"), UInt8(ascii: "^"), UInt8(ascii: "|"), UInt8(ascii: "`")][g.int(0...3)]
            let pool = round % 2 == 0 ? valid : pieces
            var value: [UInt8] = []
            for _ in 0..<g.int(1...4) { value += pool[g.int(0...(pool.count - 1))] }
            let at = try #require(text.firstIndex(of: field))
            text.replaceSubrange(at...at, with: value)
            let data = Data(text)
            guard let fast = CallRequest.fastRing(data) else {
                #expect(round % 2 == 1, "valid escapes fell back: \(String(decoding: data, as: UTF8.self))")
                continue
            }
            fastCount += 1
            #expect(Self.slow(data) == .ring(fast), "\(String(decoding: data, as: UTF8.self))")
            let strings = [fast.caller.handle, fast.caller.displayName ?? "", fast.device.id ?? "", fast.attributes["k"] ?? ""]
            #expect(!strings.joined().unicodeScalars.contains { $0.properties.generalCategory == .control })
        }
        #expect(fastCount >= 750, "the fast path is exercised")
    }

    /// RFC 3339 in the forms producers write (milliseconds, microseconds, nanoseconds, none;
    /// `Z` or an offset) parses like Foundation's parser, rounded to the millisecond.
    @Test func timestampsOfAnyPrecisionMatchFoundationsParser() throws {
        var g = Generator(state: 5)
        var accepted = 0
        for _ in 0..<3_000 {
            let millis = Int64(g.int(1_000_000_000_000...2_000_000_000_000))
            let seconds = Date(timeIntervalSince1970: TimeInterval(millis / 1000))
            let base = String(ContractCoding.format(seconds).prefix(19))
            let digits = g.int(0...10)
            var fraction = ""
            for _ in 0..<digits { fraction += String(g.int(0...9)) }
            let offsets = ["Z", "+00:00", "-00:00", "+05:30", "-08:00", "+14:00", "+14:01", "-23:59", "+0530", "+05", "z"]
            let text = base + (digits > 0 ? "." + fraction : "") + offsets[g.int(0...(offsets.count - 1))]
            if let fast = FastJSON.timestamp(text) {
                accepted += 1
                #expect(ContractCoding.parseTimestamp(text) == fast, "\(text)")
            }
        }
        #expect(accepted > 1_200)
        // Close to half a millisecond, where rounding decides: either the same answer or none.
        for _ in 0..<2_000 {
            let seconds = Date(timeIntervalSince1970: TimeInterval(g.int(1_000_000_000...2_000_000_000)))
            let base = String(ContractCoding.format(seconds).prefix(19))
            let micros = g.int(0...999) * 1000 + [497, 498, 499, 500, 501, 502, 503][g.int(0...6)]
            let digits = String(micros)
            let text = base + "." + String(repeating: "0", count: 6 - digits.count) + digits + (g.bool() ? "Z" : "+00:00")
            if let fast = FastJSON.timestamp(text) {
                #expect(ContractCoding.parseTimestamp(text) == fast, "\(text)")
            }
        }
        #expect(FastJSON.timestamp("2026-11-21T12:00:00.012345+00:00") == Date(timeIntervalSince1970: 1_795_262_400.012))
        #expect(FastJSON.timestamp("2026-11-21T13:30:00.999999999+01:30") == Date(timeIntervalSince1970: 1_795_262_401))
        #expect(FastJSON.timestamp("2026-11-21T12:00:00Z") == Date(timeIntervalSince1970: 1_795_262_400))
        for text in ["2026-11-21T12:00:00.0005Z", "2026-11-21T12:00:00.0Zx", "2026-11-21T12:00:00.Z", "2026-11-21T23:59:60Z",
                     "2026-02-29T12:00:00Z", "2026-11-21t12:00:00Z", "2026-11-21T12:00:00.1234567891Z"] {
            #expect(FastJSON.timestamp(text) == nil, "\(text) goes to Foundation's parser")
        }
    }

    @Test func timestampsMatchFoundationsParser() {
        var g = Generator(state: 7)
        var texts = ["2026-02-30T00:00:00.000Z", "2026-13-01T00:00:00.000Z", "2026-11-21T24:00:00.000Z", "2026-11-21T12:60:00.000Z",
                     "2026-11-21T12:00:60.000Z", "1599-12-31T23:59:59.999Z", "2024-02-29T12:00:00.000Z", "2023-02-29T12:00:00.000Z",
                     "2026-11-21T12:00:00.000+00:00", "2026-11-21T12:00:00Z", "2026-11-21 12:00:00.000Z", "+026-11-21T12:00:00.000Z"]
        for _ in 0..<2_000 { texts.append(ContractCoding.format(g.date())) }
        for text in texts {
            if let fast = FastJSON.timestamp(text) {
                #expect(ContractCoding.parseTimestamp(text) == fast, "\(text)")
            }
        }
        #expect(FastJSON.timestamp("2026-11-21T12:00:00.012Z") == Date(timeIntervalSince1970: 1_795_262_400.012))
        #expect(FastJSON.timestamp("2026-02-30T00:00:00.000Z") == nil, "impossible dates go to Foundation's parser")
    }
}

extension ContractJSONWriterTests.Generator {
    /// JSON punctuation, digits, literals' letters, NUL, DEL and a UTF-8 sequence.
    static let mutationBytes = Array(#"{}[],:" \-0123456789.eE+nulltruefalse"#.utf8) + [0x00, 0x7F, 0xC3, 0xA9]

    /// One to three random edits of a document: a byte removed, inserted or replaced, or a slice
    /// (keys, members) duplicated elsewhere. For fast-path-versus-decoder tests.
    mutating func mutate(_ bytes: inout [UInt8]) {
        let inserts = Self.mutationBytes
        for _ in 0..<int(1...3) where !bytes.isEmpty {
            let at = int(0...(bytes.count - 1))
            switch int(0...3) {
            case 0: bytes.remove(at: at)
            case 1: bytes.insert(inserts[int(0...(inserts.count - 1))], at: at)
            case 2: bytes[at] = inserts[int(0...(inserts.count - 1))]
            default:
                let end = min(bytes.count, at + int(1...24))
                bytes.insert(contentsOf: bytes[at..<end], at: int(0...bytes.count))
            }
        }
    }
}
