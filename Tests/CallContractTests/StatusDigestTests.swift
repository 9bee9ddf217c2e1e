import Foundation
import Testing
@testable import CallContract

/// `StatusDigest` reads five fields of a status; its fast scanner may only accept what the
/// `Codable` path accepts, with the same values.
@Suite struct StatusDigestTests {
    typealias Generator = ContractJSONWriterTests.Generator

    static let at = Date(timeIntervalSince1970: 1_795_262_400.012)

    static func digest(of status: CallStatus) -> StatusDigest {
        StatusDigest(callId: status.callId, deviceKey: status.deviceKey, replay: status.replay, state: status.state, at: status.at,
                     tenant: status.tenant)
    }

    static func statuses(_ g: inout Generator) -> CallStatus {
        let states = CallStatus.State.allCases
        return CallStatus(
            callId: g.bool() ? "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b" : g.string(maxLength: 70),
            deviceId: g.optional { $0.string() }, deviceKey: g.optional { $0.string(maxLength: 70) }, app: g.optional { $0.string() },
            state: states[g.int(0...(states.count - 1))], attempt: g.int(0...20), replay: g.int(-2...1_002), at: g.date(),
            apns: g.optional { g in CallStatus.APNSDetails(id: g.optional { $0.string() }, status: g.optional { $0.int(100...599) },
                                                           reason: g.optional { $0.string() }) },
            error: g.optional { g in CallStatus.ErrorInfo(code: g.string(), message: g.optional { $0.string(maxLength: 40) }) },
            worker: g.string(), tenant: g.optional { $0.bool() ? "taxi" : $0.string(maxLength: 70) })
    }

    @Test func aWorkersStatusTakesTheFastPath() throws {
        let statuses = [
            CallStatus(callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceId: "phone-1", deviceKey: "k1b2c3d4e5f6a7b8", app: "rider",
                       state: .sent, attempt: 2, replay: 1, at: Self.at, apns: .init(id: "a-1", status: 200), worker: "w-1"),
            CallStatus(callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: "k1b2c3d4e5f6a7b8", state: .failed, attempt: 1,
                       at: Self.at, apns: .init(status: 410, reason: "Unregistered", timestamp: Self.at),
                       error: .init(code: "Unregistered", message: #"said "gone" \ left"#), worker: "w-1"),
            // A cancel marker: no device.
            CallStatus(callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", state: .cancelled, at: Self.at, worker: "w-2"),
            // A tenant's cancel marker: remembered under the tenant's scope.
            CallStatus(callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", state: .cancelled, at: Self.at, worker: "w-2", tenant: "clinic"),
        ]
        for status in statuses {
            let bytes = Array(try status.encoded())
            let fast = try #require(bytes.withUnsafeBytes { StatusDigest(fast: $0) }, "\(String(decoding: bytes, as: UTF8.self))")
            #expect(fast == Self.digest(of: status))
            #expect(StatusDigest(decoding: bytes) == fast)
            #expect(StatusDigest(json: bytes) == fast)
            #expect(fast.cancelScope == CallRequest.cancelScope(callId: status.callId, tenant: status.tenant))
        }
    }

    @Test func unusualDocumentsFallBackToTheDecoder() {
        let unusual = [
            // An RFC 3339 form FastJSON.timestamp leaves to Foundation, non-ASCII elsewhere, an
            // escaped field, keys in another order.
            #"{"callId":"c-1","state":"sent","at":"2026-11-21T12:00:00.0005Z","deviceKey":"k","replay":3}"#,
            #"{"worker":"wörker","callId":"c-1","state":"sent","at":"2026-11-21T12:00:00.012Z","deviceKey":"k"}"#,
            #"{"callId":"c\u002d1","state":"sent","at":"2026-11-21T12:00:00.012Z"}"#,
            #"{"error":{"message":"x\ud83d\ude00"},"callId":"c-1","state":"sent","at":"2026-11-21T12:00:00.012Z"}"#,
        ]
        for text in unusual {
            let bytes = Array(text.utf8)
            #expect(bytes.withUnsafeBytes { StatusDigest(fast: $0) } == nil, "\(text)")
            #expect(StatusDigest(json: bytes) != nil, "\(text)")
        }
        #expect(StatusDigest(json: Array(unusual[0].utf8))?.replay == 3)
        #expect(StatusDigest(json: Array(unusual[2].utf8))?.callId == "c-1")
        // Timestamps in other precisions and offsets take the fast path, with the decoder's value.
        for at in ["2026-11-21T12:00:00Z", "2026-11-21T12:00:00.012345+00:00", "2026-11-21T13:00:00.0123+01:00"] {
            let bytes = Array(#"{"callId":"c-1","state":"sent","at":"\#(at)","deviceKey":"k","replay":3}"#.utf8)
            let fast = bytes.withUnsafeBytes { StatusDigest(fast: $0) }
            #expect(fast != nil, "\(at)")
            #expect(fast == StatusDigest(decoding: bytes), "\(at)")
        }
    }

    @Test func documentsBreakingTheRulesHaveNoDigest() {
        let broken = [
            #"{"state":"sent","at":"2026-11-21T12:00:00.012Z"}"#,
            #"{"callId":"c-1","state":"ringing","at":"2026-11-21T12:00:00.012Z"}"#,
            #"{"callId":"c-1","state":"sent"}"#,
            #"{"callId":"","state":"sent","at":"2026-11-21T12:00:00.012Z"}"#,
            #"{"callId":"c-1","state":"sent","at":"2026-11-21T12:00:00.012Z","replay":1001}"#,
            #"{"callId":"c-1","state":"sent","at":"2026-11-21T12:00:00.012Z","deviceKey":""}"#,
            #"{"callId":"c-1","state":"sent","at":"2026-11-21T12:00:00.012Z"} x"#,
            #"{"callId":"c-1","state":"sent","at":"2026-11-21T12:00:00.012Z","apns":{"id":}}"#,
            "{\"callId\":\"\(String(repeating: "c", count: 65))\",\"state\":\"sent\",\"at\":\"2026-11-21T12:00:00.012Z\"}",
            "not json",
        ]
        for text in broken {
            #expect(StatusDigest(json: Array(text.utf8)) == nil, "\(text)")
        }
    }

    /// Generated statuses (hostile strings, out-of-range numbers) and random mutations of their
    /// bytes: whenever the fast scanner returns a digest, the decoder returns the same one.
    @Test func whatTheFastPathAcceptsTheDecoderAcceptsAsEqual() throws {
        var fastCount = 0
        for seed in 1...300 as ClosedRange<UInt64> {
            var g = Generator(state: seed)
            var status = Self.statuses(&g)
            if g.bool() {
                // A worker's status: plain ASCII fields, whatever state and replay.
                status = CallStatus(callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: g.bool() ? "k1b2c3d4e5f6a7b8" : nil,
                                    app: "rider", state: status.state, attempt: 1, replay: g.int(0...3), at: g.date(),
                                    apns: .init(id: "a-1", status: 200), worker: "w-1")
            }
            let original = Array(try status.encoded())
            for round in 0..<30 {
                var bytes = original
                if round > 0 { g.mutate(&bytes) }
                guard let fast = bytes.withUnsafeBytes({ StatusDigest(fast: $0) }) else { continue }
                fastCount += 1
                #expect(StatusDigest(decoding: bytes) == fast, "seed \(seed) round \(round): \(String(decoding: bytes, as: UTF8.self))")
            }
        }
        #expect(fastCount > 300, "the fast path is exercised")
    }
}
