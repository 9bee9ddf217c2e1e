import APNsSimulator
import CallpushTestSupport
import Crypto
import Foundation
import Logging
import Locking

/// Fixed identifiers and helpers shared by the simulator tests.
enum TestSupport {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let topic = "com.example.rider.voip"
    static let token = String(repeating: "ab", count: 32)
    static let otherToken = String(repeating: "cd", count: 32)
    static let payload = #"{"aps":{},"callId":"1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b","caller":"Driver Tanaka"}"#

    static var logger: Logger {
        var logger = Logger(label: "apns-simulator-tests")
        logger.logLevel = .warning
        return logger
    }

    /// A signing key and its JWTs.
    struct Signer: Sendable {
        /// Raw bytes: swift-crypto keys are not Sendable on Linux.
        private let keyBytes = P256.Signing.PrivateKey().rawRepresentation
        var key: P256.Signing.PrivateKey {
            (try? P256.Signing.PrivateKey(rawRepresentation: keyBytes)) ?? P256.Signing.PrivateKey()
        }
        var teamID = TestSupport.teamID
        var keyID = TestSupport.keyID
        /// Like real clients, one token (one `iat`) is reused unless a test asks for another.
        let issuedAt = Date()

        var tokenKey: APNSSimulatorConfiguration.TokenKey {
            .init(teamID: teamID, keyID: keyID, publicKey: key.publicKey)
        }

        func jwt(issuedAt: Date? = nil, keyID: String? = nil, teamID: String? = nil) -> String {
            let issuedAt = issuedAt ?? self.issuedAt
            let header = #"{"alg":"ES256","kid":"\#(keyID ?? self.keyID)"}"#
            let claims = #"{"iss":"\#(teamID ?? self.teamID)","iat":\#(Int64(issuedAt.timeIntervalSince1970))}"#
            let input = base64URL(Data(header.utf8)) + "." + base64URL(Data(claims.utf8))
            // swift-crypto signatures are random; any valid one will do.
            let signature = (try? key.signature(for: Data(input.utf8)))?.rawRepresentation ?? Data()
            return input + "." + base64URL(signature)
        }
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The headers of a correct VoIP push with token auth.
    static func voipHeaders(jwt: String, apnsID: String? = nil) -> [(String, String)] {
        var headers = [
            ("authorization", "bearer \(jwt)"),
            ("apns-push-type", "voip"),
            ("apns-topic", topic),
            ("apns-priority", "10"),
            ("apns-expiration", "0"),
        ]
        if let apnsID { headers.append(("apns-id", apnsID)) }
        return headers
    }

    static func path(_ token: String = TestSupport.token) -> String { "/3/device/\(token)" }

    /// Starts a simulator on ephemeral ports, runs `body`, always stops it.
    static func withSimulator<T: Sendable>(
        signer: Signer? = nil,
        configure: (inout APNSSimulatorConfiguration) -> Void = { _ in },
        _ body: (APNSSimulator) async throws -> T
    ) async throws -> T {
        var configuration = APNSSimulatorConfiguration()
        if let signer { configuration.tokenKeys = [signer.tokenKey] }
        configure(&configuration)
        let simulator = APNSSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        return try await withShutdown(simulator, shutdown: { await $0.stop() }, body)
    }

    /// Connects the raw test client and closes it after `body`.
    static func withClient<T: Sendable>(_ simulator: APNSSimulator, _ body: (H2TestClient) async throws -> T) async throws -> T {
        let client = try await H2TestClient.connect(port: simulator.port, caPEM: simulator.caCertificatePEM)
        return try await withShutdown(client, shutdown: { await $0.close() }, body)
    }
}

extension SettableClock {
    /// The clock the simulator checks JWT ages with.
    var simulatorClock: APNSSimulatorClock {
        APNSSimulatorClock(now: { self.now() })
    }
}
