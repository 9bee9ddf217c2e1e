import FCMSimulator
import Foundation
import Testing
import _CryptoExtras

@Suite("FCM simulator: the OAuth2 token endpoint checks JWT grants")
struct GrantTests {
    @Test("a valid grant gets a Bearer access token with expires_in")
    func valid() async throws {
        try await SimulatorHarness.with { harness in
            let answer = try await harness.exchange(try SimulatorHarness.grant(aud: harness.simulator.tokenURI))
            #expect(answer.status == 200, "\(answer.body)")
            #expect((answer.json["access_token"] as? String)?.isEmpty == false)
            #expect(answer.json["token_type"] as? String == "Bearer")
            #expect(answer.json["expires_in"] as? Int == 3599)
            #expect(harness.simulator.stats().tokensIssued == 1)
        }
    }

    @Test("bad grants are refused with invalid_grant (or the OAuth error that fits)")
    func refused() async throws {
        let stranger = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        try await SimulatorHarness.with { harness in
            let aud = harness.simulator.tokenURI
            let cases: [(String, String, String)] = [
                ("other key", try SimulatorHarness.grant(aud: aud, key: stranger), "invalid_grant"),
                ("wrong kid", try SimulatorHarness.grant(aud: aud, kid: "0000"), "invalid_grant"),
                ("wrong audience", try SimulatorHarness.grant(aud: "https://example.com/token"), "invalid_grant"),
                ("unknown account", try SimulatorHarness.grant(iss: "nobody@example.com", aud: aud), "invalid_grant"),
                ("too long-lived", try SimulatorHarness.grant(aud: aud, lifetime: 7200), "invalid_grant"),
                ("expired", try SimulatorHarness.grant(aud: aud, iat: Date().addingTimeInterval(-4000)), "invalid_grant"),
                ("from the future", try SimulatorHarness.grant(aud: aud, iat: Date().addingTimeInterval(900)), "invalid_grant"),
                ("no FCM scope", try SimulatorHarness.grant(aud: aud, scope: "https://www.googleapis.com/auth/devstorage.read_only"), "invalid_scope"),
                ("not a JWT", "abc.def", "invalid_grant"),
            ]
            for (name, assertion, error) in cases {
                let answer = try await harness.exchange(assertion)
                #expect(answer.status == 400, "\(name): \(answer.body)")
                #expect(answer.json["error"] as? String == error, "\(name): \(answer.body)")
            }
            let wrongType = try await harness.exchange(try SimulatorHarness.grant(aud: aud), grantType: "client_credentials")
            #expect(wrongType.json["error"] as? String == "unsupported_grant_type")
            #expect(harness.simulator.stats().tokensIssued == 0)
        }
    }

    @Test("token endpoint faults: a 503 burst, then tokens again")
    func faults() async throws {
        try await SimulatorHarness.with(faults: .init(tokenEndpoint: FCMTokenEndpointFault(status: 503, count: 2))) { harness in
            let grant = try SimulatorHarness.grant(aud: harness.simulator.tokenURI)
            #expect(try await harness.exchange(grant).status == 503)
            #expect(try await harness.exchange(grant).status == 503)
            #expect(try await harness.exchange(grant).status == 200)
            #expect(harness.simulator.stats().tokenRequestsRefused["temporarily_unavailable"] == 2)
        }
    }
}
