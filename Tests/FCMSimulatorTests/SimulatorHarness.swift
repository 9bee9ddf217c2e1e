import AsyncHTTPClient
import Crypto
import FCMSimulator
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import _CryptoExtras

/// A started FCM simulator plus a plain HTTP client (AsyncHTTPClient) that speaks to it without callpush's
/// FCM client, so the simulator is checked on its own: raw requests, hand-made JWT grants.
struct SimulatorHarness {
    static let account: FCMSimulatorServiceAccount = {
        do { return try FCMSimulatorServiceAccount.generate(projectID: "sim-test") } catch { fatalError("RSA key generation failed: \(error)") }
    }()
    static let token = "c2ltLXRlc3Q:APA91bHarnessTokenHarnessTokenHarnessToken"

    let simulator: FCMSimulator
    let http: HTTPClient

    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: String
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:] }
        var error: [String: Any] { json["error"] as? [String: Any] ?? [:] }
        var fcmCode: String? {
            (error["details"] as? [[String: Any]])?.first { $0["@type"] as? String == "type.googleapis.com/google.firebase.fcm.v1.FcmError" }?["errorCode"] as? String
        }
        var violatedFields: [String] {
            ((error["details"] as? [[String: Any]])?.first { $0["@type"] as? String == "type.googleapis.com/google.rpc.BadRequest" }?["fieldViolations"]
                as? [[String: Any]])?.compactMap { $0["field"] as? String } ?? []
        }
    }

    static func with<T>(
        faults: FCMSimulatorFaults = .init(), http1: Bool = false, configure: (inout FCMSimulatorConfiguration) -> Void = { _ in },
        _ body: (SimulatorHarness) async throws -> T
    ) async throws -> T {
        var configuration = FCMSimulatorConfiguration()
        configuration.serviceAccounts = [account]
        configuration.faults = faults
        configure(&configuration)
        var logger = Logger(label: "fcm-simulator-test")
        logger.logLevel = .warning
        let simulator = try FCMSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(simulator.caCertificatePEM.utf8)))
        var httpConfiguration = HTTPClient.Configuration(tlsConfiguration: tls)
        httpConfiguration.httpVersion = http1 ? .http1Only : .automatic
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)
        let harness = SimulatorHarness(simulator: simulator, http: http)
        do {
            let result = try await body(harness)
            try? await http.shutdown()
            await simulator.stop()
            return result
        } catch {
            try? await http.shutdown()
            await simulator.stop()
            throw error
        }
    }

    func request(_ method: HTTPMethod, _ url: String, headers: [(String, String)] = [], body: String? = nil) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await http.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        var headerMap: [String: String] = [:]
        for header in response.headers { headerMap[header.name.lowercased()] = header.value }
        return Answer(status: Int(response.status.code), headers: headerMap, body: String(buffer: bytes))
    }

    /// A JWT grant signed with `key` (the account's by default) and the given claims.
    static func grant(
        iss: String = account.clientEmail, aud: String, scope: String = "https://www.googleapis.com/auth/firebase.messaging",
        iat: Date = Date(), lifetime: TimeInterval = 3600, kid: String? = account.privateKeyID, key: _RSA.Signing.PrivateKey? = nil
    ) throws -> String {
        func encode(_ object: [String: Any]) throws -> String {
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            return data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        var header: [String: Any] = ["alg": "RS256", "typ": "JWT"]
        if let kid { header["kid"] = kid }
        let issued = Int(iat.timeIntervalSince1970)
        let encodedHeader = try encode(header)
        let encodedClaims = try encode(["iss": iss, "aud": aud, "scope": scope, "iat": issued, "exp": issued + Int(lifetime)])
        let input = encodedHeader + "." + encodedClaims
        let signer = try key ?? _RSA.Signing.PrivateKey(pemRepresentation: account.privateKeyPEM!)
        let signature = try signer.signature(for: SHA256.hash(data: Data(input.utf8)), padding: .insecurePKCS1v1_5)
        return input + "." + signature.rawRepresentation.base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    func exchange(_ assertion: String, grantType: String = "urn:ietf:params:oauth:grant-type:jwt-bearer") async throws -> Answer {
        try await request(
            .POST, simulator.tokenURI, headers: [("content-type", "application/x-www-form-urlencoded")],
            body: "grant_type=\(grantType.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&assertion=\(assertion)")
    }

    /// A fresh access token from the simulator's token endpoint.
    func accessToken() async throws -> String {
        let answer = try await exchange(try Self.grant(aud: simulator.tokenURI))
        guard let token = answer.json["access_token"] as? String else { throw HarnessError(message: "no token: \(answer.body)") }
        return token
    }

    func send(_ body: String, project: String = account.projectID, accessToken: String?) async throws -> Answer {
        var headers = [("content-type", "application/json")]
        if let accessToken { headers.append(("authorization", "Bearer \(accessToken)")) }
        return try await request(.POST, "\(simulator.baseURL)/v1/projects/\(project)/messages:send", headers: headers, body: body)
    }

    static func message(token: String = token, data: String = #"{"callId":"c1"}"#, android: String = #"{"priority":"HIGH","ttl":"30s","collapse_key":"c1","direct_boot_ok":true}"#) -> String {
        #"{"message":{"token":"\#(token)","data":\#(data),"android":\#(android)}}"#
    }

    struct HarnessError: Error { var message: String }
}
