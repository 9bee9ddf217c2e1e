import APNsSimulator
import Foundation
import Testing

/// One request shape and the answer APNs gives it.
struct ValidationCase: Sendable, CustomTestStringConvertible {
    var name: String
    var method = "POST"
    var path = TestSupport.path()
    /// Header edits applied to a correct VoIP push: nil value removes the header.
    var edits: [(String, String?)] = []
    /// Headers appended after the edits (to create duplicates).
    var extra: [(String, String)] = []
    var body: String? = TestSupport.payload
    var status: Int
    var reason: String?

    var testDescription: String { name }

    /// A JSON payload of exactly `size` bytes.
    static func payload(size: Int) -> String {
        let skeleton = #"{"aps":{},"pad":""}"#
        return #"{"aps":{},"pad":""# + String(repeating: "x", count: size - skeleton.utf8.count) + #""}"#
    }

    static let all: [ValidationCase] = [
        ValidationCase(name: "valid VoIP push", status: 200),
        ValidationCase(name: "GET is not allowed", method: "GET", body: nil, status: 405, reason: "MethodNotAllowed"),
        ValidationCase(name: "wrong path", path: "/3/devices/\(TestSupport.token)", status: 404, reason: "BadPath"),
        ValidationCase(name: "old API version", path: "/2/device/\(TestSupport.token)", status: 404, reason: "BadPath"),
        ValidationCase(name: "no token in path", path: "/3/device/", status: 400, reason: "MissingDeviceToken"),
        ValidationCase(name: "token not hex", path: "/3/device/" + String(repeating: "zz", count: 32), status: 400, reason: "BadDeviceToken"),
        ValidationCase(name: "token too short", path: "/3/device/abcd", status: 400, reason: "BadDeviceToken"),
        ValidationCase(name: "missing topic with token auth", edits: [("apns-topic", nil)], status: 400, reason: "MissingTopic"),
        ValidationCase(name: "voip push to a non-.voip topic", edits: [("apns-topic", "com.example.rider")], status: 400, reason: "InvalidPushType"),
        ValidationCase(name: "alert push to a .voip topic", edits: [("apns-push-type", "alert")], status: 400, reason: "InvalidPushType"),
        ValidationCase(name: "unknown push type", edits: [("apns-push-type", "ring")], status: 400, reason: "InvalidPushType"),
        ValidationCase(name: "priority 7", edits: [("apns-priority", "7")], status: 400, reason: "BadPriority"),
        ValidationCase(name: "priority 5 is fine", edits: [("apns-priority", "5")], status: 200),
        ValidationCase(name: "expiration not numeric", edits: [("apns-expiration", "soon")], status: 400, reason: "BadExpirationDate"),
        ValidationCase(name: "apns-id not a UUID", edits: [("apns-id", "call-42")], status: 400, reason: "BadMessageId"),
        ValidationCase(name: "collapse id over 64 bytes", edits: [("apns-collapse-id", String(repeating: "c", count: 65))], status: 400, reason: "BadCollapseId"),
        ValidationCase(name: "collapse id of 64 bytes", edits: [("apns-collapse-id", String(repeating: "c", count: 64))], status: 200),
        ValidationCase(name: "duplicate apns-topic", extra: [("apns-topic", TestSupport.topic)], status: 400, reason: "DuplicateHeaders"),
        ValidationCase(name: "empty payload", body: nil, status: 400, reason: "PayloadEmpty"),
        ValidationCase(name: "payload not JSON", body: "ring ring", status: 400, reason: "PayloadEmpty"),
        ValidationCase(name: "VoIP payload of 5120 bytes", body: payload(size: 5120), status: 200),
        ValidationCase(name: "VoIP payload of 5121 bytes", body: payload(size: 5121), status: 413, reason: "PayloadTooLarge"),
        ValidationCase(
            name: "alert payload of 4097 bytes",
            edits: [("apns-push-type", "alert"), ("apns-topic", "com.example.rider")],
            body: payload(size: 4097), status: 413, reason: "PayloadTooLarge"
        ),
        ValidationCase(name: "no authorization", edits: [("authorization", nil)], status: 403, reason: "MissingProviderToken"),
        ValidationCase(name: "garbage bearer token", edits: [("authorization", "bearer abc.def.ghi")], status: 403, reason: "InvalidProviderToken"),
        ValidationCase(name: "not a bearer token", edits: [("authorization", "basic dXNlcjpwYXNz")], status: 403, reason: "InvalidProviderToken"),
    ]
}

@Suite("Request validation answers like APNs")
struct ValidationTests {
    @Test(arguments: ValidationCase.all)
    func answersStatusAndReason(_ testCase: ValidationCase) async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                var headers = TestSupport.voipHeaders(jwt: signer.jwt())
                for (name, value) in testCase.edits {
                    headers.removeAll { $0.0 == name }
                    if let value { headers.append((name, value)) }
                }
                headers += testCase.extra
                let response = try await client.send(
                    method: testCase.method, path: testCase.path, headers: headers, body: testCase.body
                )
                #expect(response.status == testCase.status)
                #expect(response.reason == testCase.reason)
                // Without an apns-id in the request the simulator makes one up, as APNs does: a
                // lower-case version-4 UUID.
                let apnsID = try #require(response.headers["apns-id"])
                #expect(UUID(uuidString: apnsID) != nil, "\(apnsID)")
                if !headers.contains(where: { $0.0 == "apns-id" }) {
                    #expect(apnsID == apnsID.lowercased() && Array(apnsID)[14] == "4" && "89ab".contains(Array(apnsID)[19]), "\(apnsID)")
                }
                #expect(simulator.pushes().count == (testCase.status == 200 ? 1 : 0))
            }
        }
    }

    @Test("200 echoes apns-id, adds apns-unique-id in sandbox and records the push")
    func acceptedPushIsRecorded() async throws {
        let signer = TestSupport.Signer()
        let apnsID = "7c9f4e2a-1b3d-4c5e-8f90-a1b2c3d4e5f6"
        try await TestSupport.withSimulator(signer: signer) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                let response = try await client.send(
                    path: TestSupport.path(), headers: TestSupport.voipHeaders(jwt: signer.jwt(), apnsID: apnsID),
                    body: TestSupport.payload
                )
                #expect(response.status == 200)
                #expect(response.headers["apns-id"] == apnsID)
                let uniqueID = try #require(response.headers["apns-unique-id"])
                #expect(UUID(uuidString: uniqueID) != nil && Array(uniqueID)[14] == "4" && uniqueID == uniqueID.lowercased())
                let push = try #require(simulator.pushes().first)
                #expect(push.deviceToken == TestSupport.token)
                #expect(push.payload == TestSupport.payload)
                #expect(push.apnsID == apnsID)
                #expect(push.uniqueID == uniqueID)
                #expect(push.headers["apns-push-type"] == "voip")
                #expect(push.headers["apns-topic"] == TestSupport.topic)
                #expect(push.headers["apns-priority"] == "10")
                #expect(push.headers["apns-expiration"] == "0")
                #expect(push.headers["authorization"]?.contains("redacted") == true)
                #expect(push.headers["authorization"]?.contains(signer.jwt().prefix(20)) == false)
                simulator.resetPushes()
                #expect(simulator.pushes().isEmpty)
                // Tokens are recorded lowercase, whatever case the path used.
                let upper = try await client.send(
                    path: "/3/device/" + TestSupport.token.uppercased(), headers: TestSupport.voipHeaders(jwt: signer.jwt()),
                    body: TestSupport.payload
                )
                #expect(upper.status == 200)
                #expect(simulator.pushes().first?.deviceToken == TestSupport.token.lowercased())
            }
        }
    }

    @Test("production answers without apns-unique-id and generates a lowercase apns-id")
    func productionHasNoUniqueID() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer, configure: { $0.environment = .production }) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                let response = try await client.send(
                    path: TestSupport.path(), headers: TestSupport.voipHeaders(jwt: signer.jwt()), body: TestSupport.payload
                )
                #expect(response.status == 200)
                #expect(response.headers["apns-unique-id"] == nil)
                let id = try #require(response.headers["apns-id"])
                #expect(UUID(uuidString: id) != nil)
                #expect(id == id.lowercased())
            }
        }
    }
}
