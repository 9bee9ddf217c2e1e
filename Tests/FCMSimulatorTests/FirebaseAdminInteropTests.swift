import CallpushTestSupport
import FCMSimulator
import Foundation
import Testing

@Suite("Interoperability with an independent client (firebase-admin)")
struct FirebaseAdminInteropTests {
    static var scriptPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("firebase_admin/send_fcm.py").path
    }

    @Test("an unmodified firebase-admin sends a high-priority data message that is accepted and recorded; malformed ones get FCM's errors")
    func firebaseAdmin() async throws {
        let python = try #require(
            ChildProcess.findExecutable("python3"), "python3 is required for this test (scripts/install-deps provisions python3 + firebase-admin)")
        try await withTemporaryDirectory("firebase-admin") { directory in
            let caPath = directory.appendingPathComponent("ca.pem").path
            let accountPath = directory.appendingPathComponent("service-account.json").path
            let dead = "ZGVhZA:APA91bUninstalledUninstalled"
            let callID = "call-\(UUID().uuidString.lowercased())"

            try await SimulatorHarness.with(faults: .init(tokenOutcomes: [dead: .unregistered])) { harness in
                let simulator = harness.simulator
                try simulator.writeCACertificate(to: caPath)
                try simulator.writeServiceAccount(to: accountPath)
                var environment = ProcessInfo.processInfo.environment
                environment["REQUESTS_CA_BUNDLE"] = caPath
                environment["SSL_CERT_FILE"] = caPath
                let output = try await ChildProcess.run(python, [
                    Self.scriptPath, "--base-url", simulator.baseURL, "--service-account", accountPath,
                    "--token", SimulatorHarness.token, "--unregistered-token", dead, "--call-id", callID,
                ], environment: environment, timeout: .seconds(60))
                #expect(output.status != 2, "firebase-admin is not installed for \(python): \(output.stderr)")
                #expect(output.status == 0, "send_fcm.py failed: \(output.stdout) \(output.stderr)")
                #expect(!output.timedOut)

                let recorded = try #require(simulator.messages().first, "nothing recorded; script said: \(output.stdout) \(output.stderr)")
                #expect(simulator.messages().count == 1)
                #expect(recorded.token == SimulatorHarness.token)
                #expect(recorded.data == ["callId": callID, "handle": "driver-1234", "kind": "ring"])
                #expect(recorded.android?.priority?.uppercased() == "HIGH")
                #expect(recorded.android?.ttl == "30s")
                #expect(recorded.android?.collapseKey == callID)
                #expect(recorded.android?.directBootOk == true)
                #expect(!recorded.hasNotification)
                #expect(recorded.httpVersion == "HTTP/1.1")
                #expect(simulator.stats().tokensIssued == 1)

                let line = try #require(output.stdout.split(separator: "\n").last.map(String.init))
                let result = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                #expect(result["name"] as? String == recorded.name)
                let errors = try #require(result["errors"] as? [String: [String: Any]])
                #expect(errors["too-big"]?["class"] as? String == "InvalidArgumentError")
                #expect(errors["too-big"]?["status"] as? Int == 400)
                #expect(errors["bad-token"]?["class"] as? String == "InvalidArgumentError")
                #expect(errors["reserved-key"]?["class"] as? String == "InvalidArgumentError")
                #expect(errors["unregistered"]?["class"] as? String == "UnregisteredError")
                #expect(errors["unregistered"]?["status"] as? Int == 404)
            }
        }
    }
}
