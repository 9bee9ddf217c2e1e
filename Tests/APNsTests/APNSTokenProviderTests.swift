import CallpushTestSupport
import Crypto
import Foundation
import Locking
import Testing

@testable import APNs

extension SettableClock {
    /// A clock at a fixed instant, so token ages do not depend on when the test runs.
    static func fixed() -> SettableClock { SettableClock(Date(timeIntervalSince1970: 1_800_000_000)) }

    func advance(minutes: Double) { advance(by: minutes * 60) }
}

@Suite struct APNSTokenProviderTests {
    static func makeKey(_ privateKey: P256.Signing.PrivateKey = P256.Signing.PrivateKey()) throws -> APNSSigningKey {
        try APNSSigningKey(p8PEM: privateKey.pemRepresentation, keyID: "ABC123DEFG", teamID: "TEAM123456")
    }

    static func decode(_ part: Substring) throws -> Data {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return try #require(Data(base64Encoded: text))
    }

    @Test func jwtHasES256HeaderClaimsAndAVerifyingSignature() throws {
        let privateKey = P256.Signing.PrivateKey()
        let key = try Self.makeKey(privateKey)
        let clock = SettableClock.fixed()
        let provider = APNSTokenProvider(key: key, now: clock.now)
        let token = try provider.token()
        let parts = token.jwt.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)

        let header = try JSONSerialization.jsonObject(with: Self.decode(parts[0])) as? [String: Any]
        #expect(header?["alg"] as? String == "ES256")
        #expect(header?["kid"] as? String == "ABC123DEFG")
        let claims = try JSONSerialization.jsonObject(with: Self.decode(parts[1])) as? [String: Any]
        #expect(claims?["iss"] as? String == "TEAM123456")
        #expect((claims?["iat"] as? NSNumber)?.int64Value == 1_800_000_000)

        let signature = try P256.Signing.ECDSASignature(rawRepresentation: Self.decode(parts[2]))
        #expect(signature.rawRepresentation.count == 64)
        let signed = Data((parts[0] + "." + parts[1]).utf8)
        #expect(privateKey.publicKey.isValidSignature(signature, for: signed))
        #expect(!P256.Signing.PrivateKey().publicKey.isValidSignature(signature, for: signed))
        #expect(token.authorization == "bearer " + token.jwt)
    }

    @Test func tokenIsSharedAndNotRenewedBefore50Minutes() throws {
        let clock = SettableClock.fixed()
        let provider = APNSTokenProvider(key: try Self.makeKey(), now: clock.now)
        let first = try provider.token()
        clock.advance(minutes: 19)
        #expect(try provider.token() == first)
        clock.advance(minutes: 30)  // 49 min
        #expect(try provider.token() == first)
        clock.advance(minutes: 1.5)  // 50.5 min
        let renewed = try provider.token()
        #expect(renewed.generation == first.generation + 1)
        #expect(renewed.jwt != first.jwt)
        #expect(try provider.token() == renewed)
    }

    @Test func renewAfterIsClampedToAtLeast20Minutes() throws {
        let clock = SettableClock.fixed()
        let provider = APNSTokenProvider(key: try Self.makeKey(), renewAfter: .seconds(60), now: clock.now)
        let first = try provider.token()
        clock.advance(minutes: 19)
        #expect(try provider.token() == first)
        clock.advance(minutes: 2)
        #expect(try provider.token().generation == 2)
    }

    @Test func expiredProviderTokenRenewsExactlyOnceAndDoesNotLoop() throws {
        let clock = SettableClock.fixed()
        let provider = APNSTokenProvider(key: try Self.makeKey(), now: clock.now)
        let first = try provider.token()
        clock.advance(minutes: 1)

        // Many in-flight requests signed with generation 1 all get ExpiredProviderToken: one renewal.
        for _ in 0..<50 { #expect(provider.reportExpired(generation: first.generation)) }
        let second = try provider.token()
        #expect(second.generation == 2)
        #expect(provider.currentGeneration == 2)

        // The renewed token is rejected too (a loop): no further renewal within 20 minutes.
        #expect(provider.reportExpired(generation: second.generation) == false)
        clock.advance(minutes: 10)
        #expect(provider.reportExpired(generation: second.generation) == false)
        #expect(try provider.token() == second)

        // After 20 minutes a forced renewal is allowed again.
        clock.advance(minutes: 10.5)
        #expect(provider.reportExpired(generation: second.generation))
        #expect(try provider.token().generation == 3)
    }

    @Test func badKeyMaterialIsATypedFatalError() {
        #expect(throws: APNSCredentialError.self) {
            try APNSSigningKey(p8PEM: "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----", keyID: "K", teamID: "T")
        }
        #expect(throws: APNSCredentialError.self) {
            try APNSSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: "bad\"id", teamID: "T")
        }
    }
}
