import APNsSimulator
import CallpushTestSupport
import Crypto
import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import APNs

/// The client (on swift-nio-http2) against a second independent server besides the simulator: nghttpd, the
/// reference server of nghttp2 (Debian `nghttp2-server`). nghttpd answers a POST with the file at its path
/// (200) or 404, indexes its response headers in HPACK's dynamic table, announces 100 concurrent streams and
/// checks every frame the client sends.
@Suite("Interoperability with an independent HTTP/2 server (nghttpd)")
struct APNSNghttpdInteropTests {
    static func which(_ tool: String) -> String? {
        for directory in ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"] where FileManager.default.isExecutableFile(atPath: "\(directory)/\(tool)") {
            return "\(directory)/\(tool)"
        }
        return nil
    }

    /// A port that was free a moment ago (nghttpd cannot report an ephemeral port).
    static func freePort() throws -> Int {
        let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).wait()
        defer { try? channel.close().wait() }
        return channel.localAddress!.port!
    }

    @Test("600 concurrent pushes over one connection get nghttpd's answers: 200 for an existing path, 404 otherwise")
    func pushesToNghttpd() async throws {
        let nghttpd = try #require(Self.which("nghttpd"), "nghttpd is not installed (Debian nghttp2-server; scripts/install-deps)")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("nghttpd-\(UUID().uuidString)")
        let root = directory.appendingPathComponent("root/3/device")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let known = SimulatorFixture.deviceToken(1)
        try Data("ok".utf8).write(to: root.appendingPathComponent(known))
        let identity = try GeneratedTLSIdentity.generate()
        let certificate = directory.appendingPathComponent("cert.pem")
        let key = directory.appendingPathComponent("key.pem")
        try Data(identity.certificateChainPEM.utf8).write(to: certificate)
        try Data(identity.privateKeyPEM.utf8).write(to: key)

        let port = try Self.freePort()
        let server = try await ServerProcess(nghttpd, ["-d", directory.appendingPathComponent("root").path, "\(port)", key.path, certificate.path])
        defer { server.signal(SIGKILL) }  // nghttpd ignores SIGTERM while serving
        try await Self.waitForListener(port: port, process: server)

        let signingKey = try APNSSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: SimulatorFixture.keyID, teamID: SimulatorFixture.teamID)
        let client = try APNSClient.localSimulator(
            port: port, caCertificatePEM: identity.caCertificatePEM,
            apps: ["rider": APNSApp(bundleID: SimulatorFixture.bundleID, credentials: .token(signingKey))],
            configure: {
                $0.connectionsPerPool = 1
                $0.requestTimeout = .seconds(30)
            },
            logger: SimulatorFixture.logger
        )
        let outcomes = try await withTimeout(seconds: 60) {
            await withTaskGroup(of: (Bool, APNSOutcome).self) { group in
                for index in 0..<600 {
                    let isKnown = index % 2 == 0
                    let push = APNSVoIPPush(
                        app: "rider", deviceToken: isKnown ? known : SimulatorFixture.deviceToken(2), environment: .production,
                        payload: Array(#"{"aps":{},"callId":"c\#(index)"}"#.utf8))
                    group.addTask { (isKnown, await client.send(push)) }
                }
                var all: [(Bool, APNSOutcome)] = []
                for await outcome in group { all.append(outcome) }
                return all
            }
        }
        await client.shutdown()
        #expect(outcomes.count == 600)
        let unexpected = outcomes.filter { $0.1.status != ($0.0 ? 200 : 404) }
        #expect(unexpected.isEmpty, "\(unexpected.count) unexpected outcomes, e.g. \(unexpected.first.map { "\($0.1)" } ?? "")")
        #expect(outcomes.allSatisfy { $0.1.attempts == 1 })
        #expect(client.connectAttempts == 1)
    }

    static func waitForListener(port: Int, process: ServerProcess) async throws {
        for _ in 0..<500 {
            guard process.isRunning else { throw TestTimeout() }
            if (try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get().close().get()) != nil {
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TestTimeout()
    }
}
