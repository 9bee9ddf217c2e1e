@testable import FCMSimulator
import CallpushTestSupport
import Foundation
import Testing

@Suite("FCM simulator: the fast message reader agrees with the generic walk")
struct FastReaderTests {
    static let bodies: [String] = [
        // What callpush's client sends.
        #"{"message":{"token":"YmVuY2g:APA91bBench","data":{"callId":"1b4e28ba","handle":"driver-1234","displayName":"Driver Tanaka","hasVideo":"false","ackToken":"v1.1b4e28ba.0123"},"android":{"priority":"HIGH","ttl":"29.5s","collapse_key":"1b4e28ba","direct_boot_ok":true}}}"#,
        // firebase-admin's shape: camel case, other member order, whitespace, validate_only.
        "{\n  \"validate_only\": false,\n  \"message\": {\n    \"android\": {\"collapseKey\": \"c1\", \"priority\": \"high\", \"ttl\": \"3.5s\", \"directBootOk\": true, \"restrictedPackageName\": \"com.example\", \"data\": {\"x\": \"y\"}},\n    \"data\": {\"callId\": \"c1\"},\n    \"token\": \"tok:en\"\n  }\n}\n",
        // Escapes: quotes, backslash, slash, control characters, BMP and astral scalars.
        #"{"message":{"token":"t","data":{"displayName":"Tanaka \"T\" \\ \/ \n\t\u00e9\u3042\ud83d\ude00","k\u0041":"v"}}}"#,
        #"{"validateOnly":true,"message":{"token":"t","android":{"bandwidth_constrained_ok":false,"restrictedSatelliteOk":true}}}"#,
    ]

    @Test("the messages clients send are read by the fast reader, as the generic walk reads them")
    func wellFormed() throws {
        for body in Self.bodies {
            let bytes = Array(body.utf8)
            let fast = try #require(FCMMessageValidator.FastReader.parse(bytes), "\(body)")
            #expect((try? FCMMessageValidator.parseGeneric(bytes).get()) == fast, "\(body)")
        }
        let escaped = try #require(FCMMessageValidator.FastReader.parse(Array(Self.bodies[2].utf8)))
        #expect(escaped.data["displayName"] == "Tanaka \"T\" \\ / \n\t\u{e9}\u{3042}\u{1F600}")
        #expect(escaped.data["kA"] == "v")
    }

    @Test("what the fast reader leaves to the generic walk", arguments: [
        #"{"message":{"token":"t","notification":{"title":"x"}}}"#,
        #"{"message":{"token":"t","topic":"news"}}"#,
        #"{"message":{"token":"t","data":{"a":"b","a":"c"}}}"#,
        #"{"message":{"token":"t","android":{"collapse_key":"a","collapseKey":"b"}}}"#,
        #"{"validate_only":true,"validateOnly":false,"message":{"token":"t"}}"#,
        #"{"message":{"token":"t","data":{"n":1}}}"#,
        #"{"message":{"token":null}}"#,
        #"{"message":{"token":"\ud800"}}"#,
        #"{"message":{"token":"t"}} x"#,
        #"{"message":{"token":"t",}}"#,
        #"{"message":{"token":"t"}"#,
        #"{"other":1,"message":{"token":"t"}}"#,
        "{\"message\":{\"token\":\"a\u{01}b\"}}",
    ])
    func leftToTheGenericWalk(_ body: String) {
        #expect(FCMMessageValidator.FastReader.parse(Array(body.utf8)) == nil)
    }

    @Test("random mutations: whatever the fast reader accepts, the generic walk reads the same")
    func mutations() {
        var generator = SystemRandomNumberGenerator()
        let inserts = Array(#"{}[],:" \/-0123456789.eEnulltruefalseu"#.utf8) + [0x00, 0x7F, 0xC3, 0xE3]
        var accepted = 0
        var mutatedAccepted = 0
        for body in Self.bodies {
            let original = Array(body.utf8)
            for round in 0..<500 {
                var bytes = original
                if round > 0 { ByteMutation.mutate(&bytes, alphabet: inserts, using: &generator) }
                guard let fast = FCMMessageValidator.FastReader.parse(bytes) else { continue }
                accepted += 1
                if bytes != original { mutatedAccepted += 1 }
                let generic = FCMMessageValidator.parseGeneric(bytes)
                #expect((try? generic.get()) == fast, "\(String(decoding: bytes, as: UTF8.self))")
            }
        }
        #expect(accepted >= Self.bodies.count && mutatedAccepted > 50, "both sides are exercised (\(mutatedAccepted) mutated bodies read fast)")
    }
}
