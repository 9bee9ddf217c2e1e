import APNsSimulator
import AsyncHTTPClient
import CallContract
import Foundation
import NIOCore
import NIOSSL
import Testing
@testable import DispatchService

/// dispatch serving HTTPS itself, with the certificate reloaded when its files change.
@Suite struct TLSTests {
    /// A generated CA and a certificate for localhost / 127.0.0.1, written as PEM files.
    static func writeIdentity(to directory: URL) throws -> GeneratedTLSIdentity {
        let identity = try GeneratedTLSIdentity.generate()
        try Data(identity.certificateChainPEM.utf8).write(to: directory.appendingPathComponent("chain.pem"))
        try Data(identity.privateKeyPEM.utf8).write(to: directory.appendingPathComponent("key.pem"))
        return identity
    }

    static func client(trusting identity: GeneratedTLSIdentity) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(identity.caCertificatePEM.utf8)))
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(10))
        configuration.connectionPool = .init(idleTimeout: .milliseconds(1))
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    static func status(_ client: HTTPClient, _ url: String) async throws -> Int {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Authorization", value: "Bearer \(testKey)")
        request.headers.add(name: "Connection", value: "close")
        let response = try await client.execute(request, timeout: .seconds(10))
        _ = try await response.body.collect(upTo: 1 << 20)
        return Int(response.status.code)
    }

    @Test func servesHTTPSAndPicksUpARenewedCertificate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dispatch-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let first = try Self.writeIdentity(to: directory)
        var configuration = testConfiguration()
        var files = TLSFiles(certificateChain: directory.appendingPathComponent("chain.pem").path,
                             privateKey: directory.appendingPathComponent("key.pem").path)
        files.reloadInterval = .milliseconds(100)
        configuration.tls = files
        try await APIHarness.with(configuration) { h in
            try await Self.withClient(trusting: first) { trustsFirst in
                let callId = CallID.make()
                #expect(try await Self.status(trustsFirst, "https://127.0.0.1:\(h.port)/healthz") == 200)
                var ring = HTTPClientRequest(url: "https://127.0.0.1:\(h.port)/v1/calls")
                ring.method = .POST
                ring.headers.add(name: "Authorization", value: "Bearer \(testKey)")
                ring.body = .bytes(ByteBuffer(data: json(ringBody(callId: callId))))
                #expect(try await trustsFirst.execute(ring, timeout: .seconds(10)).status.code == 202)

                let second = try Self.writeIdentity(to: directory)
                try await Self.withClient(trusting: second) { trustsSecond in
                    var reloaded = false
                    for _ in 0..<100 where !reloaded {
                        reloaded = (try? await Self.status(trustsSecond, "https://127.0.0.1:\(h.port)/healthz")) == 200
                        if !reloaded { try await Task.sleep(for: .milliseconds(100)) }
                    }
                    #expect(reloaded, "new connections get the renewed certificate without a restart")
                    await #expect(throws: (any Error).self) { try await Self.status(trustsFirst, "https://127.0.0.1:\(h.port)/healthz") }
                }
            }
        }
    }

    /// Runs `body` with a client trusting `identity`'s CA and shuts the client down however `body`
    /// ends (AsyncHTTPClient traps when a client is released without a shutdown).
    static func withClient(trusting identity: GeneratedTLSIdentity, _ body: (HTTPClient) async throws -> Void) async throws {
        let client = try client(trusting: identity)
        do {
            try await body(client)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    @Test func aCertificateThatDoesNotLoadStopsTheStartNamingTheSetting() throws {
        var configuration = testConfiguration()
        configuration.tls = TLSFiles(certificateChain: "/nonexistent/chain.pem", privateKey: "/nonexistent/key.pem")
        #expect(throws: DispatchConfigurationError.self) { try DispatchApp(configuration: configuration, logger: quietLogger) }
    }
}
