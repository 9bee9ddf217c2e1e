import APNsSimulator
import CallpushTestSupport
import Foundation
import Testing

@testable import APNs

/// Certificate auth (PKCS#12 and PEM). Client certificates are made with the `openssl` CLI (serverAuth-only
/// certificates cannot authenticate a client), so these tests need `openssl` on PATH.
extension APNSIntegration {
    @Suite struct APNSCertificateAuthTests {
        struct ClientIdentity {
            let directory: String
            var caPEM: String { (try? String(contentsOfFile: directory + "/ca.pem", encoding: .utf8)) ?? "" }
            var certificatePath: String { directory + "/client.pem" }
            var keyPath: String { directory + "/client.key" }
            var pkcs12Path: String { directory + "/client.p12" }
        }

        static func shell(_ arguments: [String], in directory: String) async throws {
            let result = try await ChildProcess.run("/usr/bin/env", arguments, workingDirectory: directory)
            guard result.status == 0 else { throw TestTimeout() }
        }

        static func makeClientIdentity() async throws -> ClientIdentity {
            let directory = NSTemporaryDirectory() + "apns-cert-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n".write(toFile: directory + "/ext.cnf", atomically: true, encoding: .utf8)
            let steps: [[String]] = [
                ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                 "-subj", "/CN=Test Push CA", "-keyout", "ca.key", "-out", "ca.pem"],
                ["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-subj", "/UID=com.example.legacy/CN=VoIP Services: com.example.legacy", "-keyout", "client.key", "-out", "client.csr"],
                ["openssl", "x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", "ext.cnf", "-out", "client.pem"],
                ["openssl", "pkcs12", "-export", "-inkey", "client.key", "-in", "client.pem", "-out", "client.p12",
                 "-passout", "pass:s3cret", "-keypbe", "PBE-SHA1-3DES", "-certpbe", "PBE-SHA1-3DES", "-macalg", "sha1"],
            ]
            for step in steps { try await shell(step, in: directory) }
            return ClientIdentity(directory: directory)
        }

        @Test func pkcs12AndPEMCertificatesAuthenticatePushes() async throws {
            let identity = try await Self.makeClientIdentity()
            defer { try? FileManager.default.removeItem(atPath: identity.directory) }
            #expect(throws: APNSCredentialError.self) { try APNSClientCertificate.pkcs12(path: identity.pkcs12Path, password: "wrong") }
            let fromP12 = try APNSClientCertificate.pkcs12(path: identity.pkcs12Path, password: "s3cret")
            let fromPEM = try APNSClientCertificate.pem(certificatePath: identity.certificatePath, privateKeyPath: identity.keyPath)

            var simulatorConfiguration = APNSSimulatorConfiguration()
            simulatorConfiguration.adminPort = nil
            simulatorConfiguration.trustedClientCAPEM = identity.caPEM
            simulatorConfiguration.requireClientCertificate = true
            let simulator = APNSSimulator(configuration: simulatorConfiguration, logger: SimulatorFixture.logger)
            try await simulator.start()
            var configuration = APNSClientConfiguration()
            configuration.sandboxEndpoint = APNSEndpoint(host: "127.0.0.1", port: simulator.port)
            configuration.additionalTrustedCAPEM = [simulator.caCertificatePEM]
            let client = try APNSClient(
                configuration: configuration,
                apps: [
                    "p12": APNSApp(bundleID: "com.example.legacy", credentials: .certificate(fromP12)),
                    "pem": APNSApp(bundleID: "com.example.legacy", credentials: .certificate(fromPEM)),
                ],
                logger: SimulatorFixture.logger)
            let outcomes = try await withTimeout(seconds: 30) {
                [await client.send(APNSVoIPPush(app: "p12", deviceToken: SimulatorFixture.deviceToken(1), environment: .sandbox, payload: Array("{}".utf8))),
                 await client.send(APNSVoIPPush(app: "pem", deviceToken: SimulatorFixture.deviceToken(1), environment: .sandbox, payload: Array("{}".utf8)))]
            }
            #expect(outcomes.allSatisfy { $0.isSent }, "\(outcomes.map { "\($0) \($0.error.map { "\($0)" } ?? "")" })")
            let recorded = simulator.pushes()
            #expect(recorded.count == 2)
            #expect(recorded.allSatisfy { $0.headers["authorization"] == nil })  // no JWT with certificate auth
            await client.shutdown()
            await simulator.stop()
        }
    }
}
