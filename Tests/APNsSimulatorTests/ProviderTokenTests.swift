import APNsSimulator
import CallpushTestSupport
import Foundation
import Testing

@Suite("Provider token (JWT) checks")
struct ProviderTokenTests {
    private func send(_ client: H2TestClient, jwt: String) async throws -> H2Response {
        try await client.send(path: TestSupport.path(), headers: TestSupport.voipHeaders(jwt: jwt), body: TestSupport.payload)
    }

    /// A simulator that accepts a new signer's key and reads the time from a manual clock, and a client
    /// connected to it.
    private func withSimulatorOnClock(
        _ body: (TestSupport.Signer, SettableClock, APNSSimulator, H2TestClient) async throws -> Void
    ) async throws {
        let signer = TestSupport.Signer()
        let clock = SettableClock()
        try await TestSupport.withSimulator(signer: signer, configure: { $0.clock = clock.simulatorClock }) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in try await body(signer, clock, simulator, client) }
        }
    }

    @Test("a token older than one hour is ExpiredProviderToken")
    func expiredToken() async throws {
        try await withSimulatorOnClock { signer, clock, _, client in
            let fresh = try await send(client, jwt: signer.jwt(issuedAt: clock.now().addingTimeInterval(-3500)))
            #expect(fresh.status == 200)
            clock.advance(by: 200)
            let stale = try await send(client, jwt: signer.jwt(issuedAt: clock.now().addingTimeInterval(-3700)))
            #expect(stale.status == 403)
            #expect(stale.reason == "ExpiredProviderToken")
        }
    }

    @Test("a new token within 20 minutes of the previous one is TooManyProviderTokenUpdates")
    func tooManyTokenUpdates() async throws {
        try await withSimulatorOnClock { signer, clock, _, client in
            let first = signer.jwt(issuedAt: clock.now())
            #expect(try await send(client, jwt: first).status == 200)

            clock.advance(by: 5 * 60)
            let early = try await send(client, jwt: signer.jwt(issuedAt: clock.now()))
            #expect(early.status == 429)
            #expect(early.reason == "TooManyProviderTokenUpdates")
            // Reusing the current token stays fine.
            #expect(try await send(client, jwt: first).status == 200)

            clock.advance(by: 16 * 60)
            let renewed = signer.jwt(issuedAt: clock.now())
            #expect(try await send(client, jwt: renewed).status == 200)
            #expect(try await send(client, jwt: renewed).status == 200)
        }
    }

    @Test("a token signed by another key is InvalidProviderToken")
    func wrongKey() async throws {
        let signer = TestSupport.Signer()
        let impostor = TestSupport.Signer()  // same team and key ID, different key
        try await TestSupport.withSimulator(signer: signer) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                let response = try await send(client, jwt: impostor.jwt())
                #expect(response.status == 403)
                #expect(response.reason == "InvalidProviderToken")
                #expect(simulator.pushes().isEmpty)
            }
        }
    }

    @Test("an unknown key ID or team is InvalidProviderToken")
    func unknownKeyOrTeam() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                let unknownKey = try await send(client, jwt: signer.jwt(keyID: "OTHERKEY99"))
                #expect(unknownKey.status == 403)
                #expect(unknownKey.reason == "InvalidProviderToken")
                let otherTeam = try await send(client, jwt: signer.jwt(teamID: "OTHERTEAM9"))
                #expect(otherTeam.status == 403)
                #expect(otherTeam.reason == "InvalidProviderToken")
            }
        }
    }

    @Test("processes sharing a key, each with its own token, are all accepted (updates are counted per connection)")
    func sharedKeyAcrossConnections() async throws {
        try await withSimulatorOnClock { signer, clock, simulator, first in
            #expect(try await send(first, jwt: signer.jwt(issuedAt: clock.now())).status == 200)
            clock.advance(by: 90)
            try await TestSupport.withClient(simulator) { second async throws in
                // A worker started 90 s later signs its own token: a different iat on another connection.
                #expect(try await send(second, jwt: signer.jwt(issuedAt: clock.now())).status == 200)
            }
        }
    }

    @Test("a second key on the same connection is UnrelatedKeyIdInToken; a new connection accepts it")
    func unrelatedKeyOnConnection() async throws {
        let first = TestSupport.Signer()
        var second = TestSupport.Signer()
        second.keyID = "KEY7654321"
        try await TestSupport.withSimulator(configure: { $0.tokenKeys = [first.tokenKey, second.tokenKey] }) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                #expect(try await send(client, jwt: first.jwt()).status == 200)
                let mixed = try await send(client, jwt: second.jwt())
                #expect(mixed.status == 403)
                #expect(mixed.reason == "UnrelatedKeyIdInToken")
            }
            try await TestSupport.withClient(simulator) { client async throws in
                #expect(try await send(client, jwt: second.jwt()).status == 200)
            }
        }
    }

    @Test("ramp-up announces one stream until the first authenticated success")
    func rampUpStreams() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer, configure: {
            $0.rampUpConcurrentStreams = true
            $0.maxConcurrentStreams = 500
        }) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                let response = try await send(client, jwt: signer.jwt())
                #expect(response.status == 200)
                #expect(client.maxConcurrentStreams == 500)
            }
        }
    }

    @Test("without a token, allowUnauthenticated accepts the push")
    func allowUnauthenticated() async throws {
        try await TestSupport.withSimulator(configure: { $0.allowUnauthenticated = true }) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                var headers = TestSupport.voipHeaders(jwt: "")
                headers.removeAll { $0.0 == "authorization" }
                let response = try await client.send(path: TestSupport.path(), headers: headers, body: TestSupport.payload)
                #expect(response.status == 200)
                #expect(simulator.pushes().count == 1)
            }
        }
    }
}
