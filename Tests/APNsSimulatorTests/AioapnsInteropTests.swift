import APNsSimulator
import CallpushTestSupport
import Crypto
import Foundation
import Testing

@Suite("Interoperability with an independent client (aioapns)")
struct AioapnsInteropTests {
    static var scriptPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("aioapns/send_voip.py").path
    }

    @Test("an unmodified aioapns sends a VoIP push with token auth and the simulator records it")
    func aioapnsVoipPush() async throws {
        let python = try #require(
            ChildProcess.findExecutable("python3"), "python3 is required for this test (CI provisions python3 + aioapns)"
        )
        let signer = TestSupport.Signer()
        try await withTemporaryDirectory("aioapns") { directory in
            let keyPath = directory.appendingPathComponent("AuthKey.p8").path
            let caPath = directory.appendingPathComponent("ca.pem").path
            try signer.key.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
            let callID = UUID().uuidString.lowercased()

            try await TestSupport.withSimulator(signer: signer) { simulator async throws in
                try simulator.writeCACertificate(to: caPath)
                let before = Date()
                let output = try await ChildProcess.run(python, [
                    Self.scriptPath, "--port", String(simulator.port), "--ca", caPath, "--key", keyPath,
                    "--key-id", signer.keyID, "--team-id", signer.teamID, "--topic", TestSupport.topic,
                    "--token", TestSupport.token, "--count", "1", "--call-id", callID, "--ttl", "30",
                ])
                #expect(output.status != 2, "aioapns is not installed for \(python): \(output.stderr)")
                #expect(output.status == 0, "send_voip.py failed: \(output.stdout) \(output.stderr)")
                #expect(!output.timedOut)

                let push = try #require(simulator.pushes().first, "no push recorded; script said: \(output.stdout) \(output.stderr)")
                #expect(simulator.pushes().count == 1)
                #expect(push.deviceToken == TestSupport.token)
                #expect(push.headers["apns-push-type"] == "voip")
                #expect(push.headers["apns-topic"] == TestSupport.topic)
                #expect(push.headers["apns-priority"] == "10")
                let expiration = try #require(push.headers["apns-expiration"].flatMap { Double($0) })
                #expect(expiration >= before.timeIntervalSince1970.rounded(.down) + 29)
                #expect(push.headers["authorization"]?.contains(signer.keyID) == true)
                let payload = try #require(
                    try JSONSerialization.jsonObject(with: Data(push.payload.utf8)) as? [String: Any]
                )
                #expect(payload["callId"] as? String == callID)
                #expect(payload["aps"] is [String: Any])
                #expect(output.stdout.contains(push.apnsID))
            }
        }
    }
}
