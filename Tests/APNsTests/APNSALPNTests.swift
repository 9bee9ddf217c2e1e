import APNsSimulator
import Crypto
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Testing

@testable import APNs
@testable import APNsSimulator

extension APNSIntegration {
    /// A server that completes the TLS handshake without agreeing to HTTP/2.
    @Suite struct APNSALPNTests {
        @Test func aServerThatDoesNotNegotiateHTTP2EndsThePushWithATLSFailure() async throws {
            // A TLS server that speaks only HTTP/1.1 (its ALPN list has no "h2"): the handshake completes, ALPN
            // agrees on nothing, and the client must close the connection instead of sending HTTP/2 to it.
            let certificates = try SimulatorCertificates.make(.generateSelfSigned)
            var tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: certificates.chain.map { .certificate($0) }, privateKey: .privateKey(certificates.privateKey))
            tls.applicationProtocols = ["http/1.1"]
            let context = try NIOSSLContext(configuration: tls)
            let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    }
                }
                .bind(host: "127.0.0.1", port: 0).get()
            let port = try #require(server.localAddress?.port)

            var configuration = APNSClientConfiguration.localSimulator(port: port, caCertificatePEM: certificates.caCertificatePEM)
            configuration.productionEndpoint = APNSEndpoint(host: "localhost", port: port)
            configuration.connectionsPerPool = 1
            configuration.requestTimeout = .seconds(5)
            let key = P256.Signing.PrivateKey()
            let client = try APNSClient(
                configuration: configuration,
                apps: ["rider": APNSApp(bundleID: SimulatorFixture.bundleID,
                                        credentials: .token(try APNSSigningKey(privateKey: key, keyID: SimulatorFixture.keyID,
                                                                               teamID: SimulatorFixture.teamID)))],
                logger: SimulatorFixture.logger)
            let outcome = await client.send(APNSVoIPPush(
                app: "rider", deviceToken: SimulatorFixture.deviceToken(1), environment: .sandbox,
                payload: Array(#"{"aps":{}}"#.utf8)))
            await client.shutdown()
            try await server.close()

            #expect(!outcome.isSent)
            #expect(outcome.error?.code == .tlsFailure, "\(outcome)")
            #expect(outcome.error?.message.contains("did not negotiate HTTP/2") == true, "\(String(describing: outcome.error))")
        }
    }
}
