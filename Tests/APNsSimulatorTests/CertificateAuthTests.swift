import APNsSimulator
import Foundation
import NIOSSL
import Testing

@Suite("Certificate auth and recording limits")
struct CertificateAuthTests {
    /// A client identity signed by its own CA (the generator's certificates allow client auth too).
    private static func clientIdentity() throws -> (identity: GeneratedTLSIdentity, chain: [NIOSSLCertificate], key: NIOSSLPrivateKey) {
        let identity = try GeneratedTLSIdentity.generate()
        let chain = try NIOSSLCertificate.fromPEMBytes(Array(identity.certificateChainPEM.utf8))
        let key = try NIOSSLPrivateKey(bytes: Array(identity.privateKeyPEM.utf8), format: .pem)
        return (identity, chain, key)
    }

    private func voipHeadersWithoutToken() -> [(String, String)] {
        TestSupport.voipHeaders(jwt: "").filter { $0.0 != "authorization" }
    }

    @Test("a trusted client certificate replaces the JWT; without one the push is MissingProviderToken")
    func optionalClientCertificate() async throws {
        let client = try Self.clientIdentity()
        try await TestSupport.withSimulator(configure: { $0.trustedClientCAPEM = client.identity.caCertificatePEM }) { simulator async throws in
            let withCertificate = try await H2TestClient.connect(
                port: simulator.port, caPEM: simulator.caCertificatePEM, clientCertificate: (client.chain, client.key)
            )
            let accepted = try await withCertificate.send(path: TestSupport.path(), headers: voipHeadersWithoutToken(), body: TestSupport.payload)
            await withCertificate.close()
            #expect(accepted.status == 200)

            try await TestSupport.withClient(simulator) { anonymous async throws in
                let refused = try await anonymous.send(path: TestSupport.path(), headers: voipHeadersWithoutToken(), body: TestSupport.payload)
                #expect(refused.status == 403)
                #expect(refused.reason == "MissingProviderToken")
            }
            #expect(simulator.pushes().count == 1)
        }
    }

    @Test("requireClientCertificate refuses TLS clients without a trusted certificate")
    func requiredClientCertificate() async throws {
        let client = try Self.clientIdentity()
        let stranger = try Self.clientIdentity()
        try await TestSupport.withSimulator(configure: {
            $0.trustedClientCAPEM = client.identity.caCertificatePEM
            $0.requireClientCertificate = true
        }) { simulator async throws in
            for identity in [nil, stranger] as [(identity: GeneratedTLSIdentity, chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)?] {
                await #expect(throws: (any Error).self) {
                    let connection = try await H2TestClient.connect(
                        port: simulator.port, caPEM: simulator.caCertificatePEM,
                        clientCertificate: identity.map { ($0.chain, $0.key) }
                    )
                    do {
                        _ = try await connection.send(
                            path: TestSupport.path(), headers: voipHeadersWithoutToken(), body: TestSupport.payload,
                            timeout: .seconds(3)
                        )
                    } catch {
                        await connection.close()
                        throw error
                    }
                    await connection.close()
                }
            }
            #expect(simulator.pushes().isEmpty)
        }
    }

    @Test("recorded pushes are capped: the oldest are dropped and counted")
    func recordingIsBounded() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer, configure: { $0.maxRecordedPushes = 2 }) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                for token in [TestSupport.token, TestSupport.otherToken, String(repeating: "ef", count: 32)] {
                    let response = try await client.send(path: TestSupport.path(token), headers: TestSupport.voipHeaders(jwt: signer.jwt()), body: TestSupport.payload)
                    #expect(response.status == 200)
                }
            }
            #expect(simulator.pushes().map(\.deviceToken) == [TestSupport.otherToken, String(repeating: "ef", count: 32)])
            #expect(simulator.stats().recordsDropped == 1)
            #expect(simulator.stats().accepted == 3)
        }
    }
}
