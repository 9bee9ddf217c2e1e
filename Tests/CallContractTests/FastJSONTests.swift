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

    /// Generated rings (hostile strings, out-of-range numbers) and random mutations of their
    /// bytes: whenever the fast path returns a ring, the decoder returns the same one.
    @Test func whatTheFastPathAcceptsTheDecoderAcceptsAsEqual() throws {
        var fastCount = 0
        for seed in 1...300 as ClosedRange<UInt64> {
            var g = Generator(state: seed)
            var ring = ContractJSONWriterTests().ring(&g)
            if g.bool() { ring = Self.typical }
            let original = Array(try CallRequest.ring(ring).encoded())
            for round in 0..<30 {
                var bytes = original
                if round > 0 { g.mutate(&bytes) }
                let data = Data(bytes)
                guard let fast = CallRequest.fastRing(data) else { continue }
                fastCount += 1
                #expect(Self.slow(data) == .ring(fast), "seed \(seed) round \(round): \(String(decoding: data, as: UTF8.self))")
            }
        }
        #expect(fastCount > 300, "the fast path is exercised")
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
