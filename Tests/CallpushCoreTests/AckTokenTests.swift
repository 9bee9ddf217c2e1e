import Foundation
import Testing
import CallpushCore

@Suite struct AckTokens {
    let signer = try! AckTokenSigner(secret: Array(repeating: 7, count: 32))

    @Test func tokenVerifiesForItsDeliveryOnly() {
        let token = signer.token(callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: "k1")
        #expect(signer.verify(token, callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: "k1"))
        #expect(signer.verify(token, callId: "1B4E28BA-2FA1-4D3B-A3F5-EF19B5A7633B", deviceKey: "k1"), "call ids compare case-insensitively")
        #expect(!signer.verify(token, callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: "k2"), "another device's token")
        #expect(!signer.verify(token, callId: "2b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: "k1"), "another call's token")
    }

    /// Known answers computed with Python's `hmac` and `hashlib` from the documented formats: every
    /// worker and dispatch version must make and check the same bytes.
    @Test func tokensMatchTheDocumentedFormat() throws {
        let signer = try AckTokenSigner(secret: Array("0123456789abcdef0123456789abcdef".utf8))
        let callId = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"
        #expect(signer.token(callId: callId, deviceKey: "k1") == "YkPte_C9z9nIG4AEWTcLBP3yvlrbKvx9FcLHQ027VNY")
        let deadline = Date(timeIntervalSince1970: 1_795_262_430.012)
        let v2 = "AgAAAaH9-rs8AAI6sca1Qbm8liAaQvRSqPPHcqw34ggfKPbHpjr5UTqh-g"
        #expect(signer.token(callId: callId, deviceKey: "k1", replay: 2, ringDeadline: deadline) == v2)
        #expect(signer.token(callId: callId.uppercased(), deviceKey: "k1", replay: 2, ringDeadline: deadline) == v2)
        #expect(signer.claims(v2, callId: callId, deviceKey: "k1") == .init(version: 2, replay: 2, ringDeadline: deadline))
        #expect(signer.claims("YkPte_C9z9nIG4AEWTcLBP3yvlrbKvx9FcLHQ027VNY", callId: callId, deviceKey: "k1") == .init(version: 1))
    }

    @Test func anotherSecretDoesNotVerify() throws {
        let other = try AckTokenSigner(secret: Array(repeating: 8, count: 32))
        let token = signer.token(callId: "c", deviceKey: "k")
        #expect(!other.verify(token, callId: "c", deviceKey: "k"))
    }

    @Test func garbageIsRefused() {
        #expect(!signer.verify("", callId: "c", deviceKey: "k"))
        #expect(!signer.verify("not base64 !!", callId: "c", deviceKey: "k"))
        #expect(!signer.verify(String(repeating: "A", count: 10_000), callId: "c", deviceKey: "k"))
        let token = signer.token(callId: "c", deviceKey: "k")
        #expect(!signer.verify(String(token.dropLast()), callId: "c", deviceKey: "k"), "a truncated token")
    }

    @Test func tokensMadeConcurrentlyFromOneSignerAreEachRight() async {
        // The signer copies one keyed HMAC per token; copies on many threads must not share digest state.
        let ids = (0..<2_000).map { "call-\($0)" }
        let signer = self.signer
        let tokens = await withTaskGroup(of: (Int, String).self) { group in
            for (index, id) in ids.enumerated() {
                group.addTask { (index, signer.token(callId: id, deviceKey: "k\(index % 7)")) }
            }
            return await group.reduce(into: [Int: String]()) { $0[$1.0] = $1.1 }
        }
        for (index, id) in ids.enumerated() {
            #expect(tokens[index] == signer.token(callId: id, deviceKey: "k\(index % 7)"))
            #expect(signer.verify(tokens[index] ?? "", callId: id, deviceKey: "k\(index % 7)"))
        }
    }

    @Test func versionTwoCarriesTheRingDeadlineAndReplayGenerationUnderTheMAC() throws {
        let deadline = Date(timeIntervalSince1970: 1_795_262_430.123)
        let token = signer.token(callId: "c", deviceKey: "k", replay: 3, ringDeadline: deadline)
        #expect(token.count == AckTokenSigner.tokenLength)
        let claims = try #require(signer.claims(token, callId: "c", deviceKey: "k"))
        #expect(claims.version == 2)
        #expect(claims.replay == 3)
        #expect(claims.ringDeadline == deadline)
        #expect(signer.claims(token, callId: "c", deviceKey: "k2") == nil, "another device")
        // Any change to the deadline or generation bytes breaks the MAC.
        var bytes = try #require(Base64URL.decode(token))
        for index in 1..<11 {
            bytes[index] ^= 0x01
            #expect(signer.claims(Base64URL.encode(bytes), callId: "c", deviceKey: "k") == nil, "byte \(index) altered")
            bytes[index] ^= 0x01
        }
        #expect(signer.claims(signer.token(callId: "c", deviceKey: "k"), callId: "c", deviceKey: "k") == .init(version: 1))
    }

    @Test func shortSecretsAreRefused() {
        #expect(throws: AckTokenError.secretTooShort(31)) { try AckTokenSigner(secret: Array(repeating: 1, count: 31)) }
    }

    @Test func tokenIsURLSafe() {
        for i in 0..<50 {
            let token = signer.token(callId: "call-\(i)", deviceKey: "k")
            #expect(!token.contains("+") && !token.contains("/") && !token.contains("="))
            #expect(token.count == 43)
        }
    }
}

@Suite struct APNSIDs {
    @Test func stablePerDeliveryAndAValidLowercaseUUID() throws {
        let a = APNSID.make(callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: "k1", replay: 0)
        #expect(a == APNSID.make(callId: "1B4E28BA-2FA1-4D3B-A3F5-EF19B5A7633B", deviceKey: "k1", replay: 0))
        #expect(a != APNSID.make(callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: "k2", replay: 0))
        #expect(a != APNSID.make(callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: "k1", replay: 1), "a replay is a new push")
        let uuid = try #require(UUID(uuidString: a))
        #expect(uuid.uuidString.lowercased() == a)
        #expect(Array(a)[14] == "5", "version nibble")
    }

    /// Known answer (Python's `hashlib` and `uuid` over the documented input).
    @Test func matchesTheDocumentedDerivation() {
        #expect(APNSID.make(callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: "k1", replay: 2) == "f01d176d-b0f1-5efc-aafc-4c18909e8404")
        // Lower-casing is `lowercased()`'s, non-ASCII letters included.
        #expect(APNSID.make(callId: "CALL-É", deviceKey: "k1", replay: 0) == APNSID.make(callId: "call-é", deviceKey: "k1", replay: 0))
    }
}

@Suite struct Base64URLCoding {
    /// Foundation's base64 with the RFC 4648 §5 substitutions, as the reference.
    static func reference(_ bytes: [UInt8]) -> String {
        String(Data(bytes).base64EncodedString().compactMap { character -> Character? in
            switch character {
            case "+": "-"
            case "/": "_"
            case "=": nil
            default: character
            }
        })
    }

    @Test func matchesFoundationAndRoundTrips() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            for _ in 0..<20 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let text = Base64URL.encode(bytes)
                #expect(text == Self.reference(bytes))
                #expect(Base64URL.decode(text) == bytes)
            }
        }
    }

    @Test func refusesWhatIsNotUnpaddedBase64URL() {
        for text in ["A", "AA==", "ab+c", "ab/c", "ab c", "AB", "AAAAA", "é"] {
            #expect(Base64URL.decode(text) == nil, "\(text)")
        }
        #expect(Base64URL.decode("AA") == [0])
        #expect(Base64URL.decode("") == [])
    }
}
