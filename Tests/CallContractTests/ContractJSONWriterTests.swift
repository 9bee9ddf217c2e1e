import Foundation
import Testing
@testable import CallContract

/// The hand-written encoders (`CallRequest.encoded()`, `CallStatus.encoded()`,
/// `VoIPPayload.encoded()`) must give exactly the bytes of the contract's `JSONEncoder`
/// (`ContractCoding.encode`) — the contract promises equal values give equal bytes, whichever
/// side wrote them. Compared on generated values with hostile strings and every optional both ways.
@Suite struct ContractJSONWriterTests {
    /// A deterministic generator (the failing seed is in the failure message).
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            var z = state
            z = (z ^ (z >> 33)) &* 0xff51afd7ed558ccd
            return z ^ (z >> 33)
        }
        mutating func int(_ range: ClosedRange<Int>) -> Int {
            range.lowerBound + Int(next() % UInt64(range.upperBound - range.lowerBound + 1))
        }
        mutating func bool() -> Bool { next() & 1 == 1 }

        /// Every ASCII byte (controls, quote, backslash, slash, DEL), Latin-1, CJK, an emoji, U+2028.
        mutating func string(maxLength: Int = 12) -> String {
            let pool: [Unicode.Scalar] = (0..<0x80).compactMap(Unicode.Scalar.init) + ["é", "ß", "Ω", "漢", "😀", "\u{2028}", "\u{FEFF}", "\u{00A0}"]
            var text = ""
            for _ in 0..<int(0...maxLength) { text.unicodeScalars.append(pool[int(0...(pool.count - 1))]) }
            return text
        }
        mutating func optional<T>(_ make: (inout Generator) -> T) -> T? { bool() ? make(&self) : nil }
        /// One of `edges` one time in four (values at and beyond a range's ends), else from `range`.
        mutating func edge(_ edges: [Int], else range: ClosedRange<Int>) -> Int {
            int(0...3) == 0 ? edges[int(0...(edges.count - 1))] : int(range)
        }

        /// Milliseconds from year 1 to 9999, near the epoch, and exact edges.
        mutating func date() -> Date {
            let millis: Int64
            switch int(0...3) {
            case 0: millis = Int64(int(-62_135_596_800_000...253_402_300_799_999))
            case 1: millis = Int64(int(-100_000...100_000))
            case 2: millis = [-62_135_596_800_000, 253_402_300_799_999, 951_782_400_000, 4_107_542_399_999][int(0...3)]
            default: millis = Int64(int(1_700_000_000_000...1_900_000_000_000))
            }
            return Date(timeIntervalSince1970: Double(millis) / 1000)
        }
        mutating func attributes() -> [String: String] {
            var attributes: [String: String] = [:]
            for _ in 0..<int(0...6) { attributes[string(maxLength: 6)] = string() }
            return attributes
        }
    }

    func ring(_ g: inout Generator) -> RingRequest {
        // One ring in four is for an Android device (no environment, `platform` written).
        RingRequest(
            callId: UUID().uuidString.lowercased(), app: g.string(),
            device: g.int(0...3) == 0 ? Device(fcmToken: g.string(), id: g.optional { $0.string() })
                : Device(token: g.string(), environment: g.bool() ? .sandbox : .production, id: g.optional { $0.string() }),
            caller: Caller(handle: g.string(), handleType: Caller.HandleType.allCases[g.int(0...2)], displayName: g.optional { $0.string() }),
            hasVideo: g.bool(), requestedAt: g.date(), ringDeadline: g.date(), maxDurationSeconds: g.optional { $0.int(-5...90_000) },
            attributes: g.attributes(), replay: g.int(0...1_200), tenant: g.optional { $0.bool() ? "taxi-1" : $0.string() })
    }

    @Test func callRequestsMatchTheContractEncoder() throws {
        for seed in 1...400 as ClosedRange<UInt64> {
            var g = Generator(state: seed)
            let ringEvent = CallRequest.ring(ring(&g))
            #expect(try ringEvent.encoded() == ContractCoding.encode(ringEvent), "seed \(seed)")
            let cancelEvent = CallRequest.cancel(CancelRequest(callId: "x", requestedAt: g.date(), reason: g.optional { $0.string() },
                                                                   tenant: g.optional { $0.string() }))
            #expect(try cancelEvent.encoded() == ContractCoding.encode(cancelEvent), "seed \(seed)")
        }
    }

    /// A status with hostile strings and numbers in and out of the contract's ranges; one in two
    /// with the values a worker writes (a UUID call id, a tenant name, short printable strings).
    func status(_ g: inout Generator) -> CallStatus {
        let plain = g.bool()
        func text(_ g: inout Generator) -> String { plain ? "v-\(g.int(0...999))" : g.string() }
        let apns = g.optional { g in
            CallStatus.APNSDetails(id: g.optional { text(&$0) }, uniqueId: g.optional { text(&$0) },
                                   status: g.optional { $0.int(-1...600) }, reason: g.optional { text(&$0) },
                                   timestamp: g.optional { $0.date() })
        }
        let error = g.optional { g in CallStatus.ErrorInfo(code: text(&g), message: g.optional { text(&$0) }, domain: g.optional { text(&$0) }) }
        let fcm = g.optional { g in
            CallStatus.FCMDetails(name: g.optional { text(&$0) }, status: g.optional { $0.edge([-1, 0, 999, 1_000], else: 200...503) },
                                  errorCode: g.optional { text(&$0) })
        }
        return CallStatus(
            callId: plain ? UUID().uuidString.lowercased() : g.string(), deviceId: g.optional { text(&$0) },
            deviceKey: g.optional { text(&$0) }, app: g.optional { text(&$0) },
            state: CallStatus.State.allCases[g.int(0...(CallStatus.State.allCases.count - 1))], attempt: g.edge([-1, 1_000_000, 1_000_001], else: 0...9),
            replay: g.edge([-1, 1_000, 1_001], else: 0...3), at: g.date(), apns: apns, fcm: fcm, error: error, worker: text(&g), tenant: g.optional { $0.bool() ? "taxi-1" : text(&$0) })
    }

    @Test func statusesMatchTheContractEncoder() throws {
        for seed in 1...400 as ClosedRange<UInt64> {
            var g = Generator(state: seed)
            let status = status(&g)
            #expect(try status.encoded() == ContractCoding.encode(status), "seed \(seed)")
        }
    }

    @Test func voipPayloadsMatchTheContractEncoder() throws {
        for seed in 1...400 as ClosedRange<UInt64> {
            var g = Generator(state: seed)
            let payload = VoIPPayload(ring: ring(&g), deviceKey: g.string(), ackToken: g.string())
            #expect(try payload.encoded() == ContractCoding.encode(payload), "seed \(seed)")
        }
    }

    /// Strings longer than the writer's eight-byte scan, with a byte JSON must escape (a control
    /// character, `"`, `\\`) or one it must not (space, `!`, `#`, `[`, `]`, DEL, a two-byte
    /// character) at every position: written as `JSONEncoder` writes them.
    @Test func everyPositionOfALongStringIsEscapedAsTheContractEncoderDoes() throws {
        let specials: [String] = ["\u{0}", "\u{1F}", "\n", "\"", "\\", " ", "!", "#", "[", "]", "\u{7F}", "é"]
        for length in [7, 8, 9, 15, 16, 17, 40] {
            for position in 0..<length {
                for special in specials {
                    var characters = Array(repeating: "a", count: length)
                    characters[position] = special
                    if position + 2 < length { characters[position + 2] = specials[(position + length) % specials.count] }
                    let text = characters.joined()
                    let payload = VoIPPayload(ring: FastJSONTests.typical, deviceKey: text, ackToken: "t")
                    #expect(try payload.encoded() == ContractCoding.encode(payload), "\(length) \(position) \(text.debugDescription)")
                }
            }
        }
    }

    @Test func timestampsMatchTheFoundationFormatter() {
        var g = Generator(state: 99)
        for _ in 0..<5_000 {
            let millis = ContractCoding.milliseconds(g.date())
            #expect(ContractCoding.format(Date(timeIntervalSince1970: Double(millis) / 1000)) == ContractCoding.foundationFormat(millis),
                    "millis \(millis)")
        }
    }
}
