import Foundation
import Testing
@testable import CallContract

/// A realistic FCM registration token: `<instance id>:APA91b…`, mixed case, ~160 characters.
let fcmToken = "cXk9Zq3RTpu0m1Lw8s7B-Q:APA91bHqL0v_3Zr9Xw2yKpT6nS1dF4gH7jK0lM3nB6vC9xZ2aQ5wE8rT1yU4iO7pA0sD3fG6hJ9kL2zX5cV8bN1mQ4wE7rT0yU3iO6pA9sD2fG5hJ8kL1"

/// The documented ring for an Android device (docs/contract.md).
let documentedAndroidRing = """
{
  "type": "ring",
  "callId": "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b",
  "app": "rider",
  "device": {"platform": "android", "token": "\(fcmToken)", "id": "pixel-8"},
  "caller": {"handle": "driver-1234", "handleType": "generic", "displayName": "Driver Tanaka"},
  "hasVideo": false,
  "requestedAt": "2026-11-21T12:00:00.000Z",
  "ringDeadline": "2026-11-21T12:00:30.000Z",
  "attributes": {"rideId": "R-829"},
  "replay": 0
}
"""

/// The decoder's and the fast path's answers to a ring document: both accept it as the same value,
/// or the decoder refuses it (then the fast path must not have accepted it).
private func bothPaths(_ json: String) -> (decoded: Result<CallRequest, ContractError>, fast: RingRequest?) {
    let data = Data(json.utf8)
    let decoded: Result<CallRequest, ContractError>
    do {
        decoded = .success(try ContractCoding.decode(CallRequest.self, from: data))
    } catch {
        decoded = .failure(error)
    }
    return (decoded, CallRequest.fastRing(data))
}

@Suite struct AndroidDeviceContract {
    @Test func anAndroidRingDecodesOnBothPathsAndKeepsItsTokenVerbatim() throws {
        let (decoded, fast) = bothPaths(documentedAndroidRing)
        guard case .success(.ring(let ring)) = decoded else { Issue.record("refused: \(decoded)"); return }
        #expect(ring.device.platform == .android)
        #expect(ring.device.token == fcmToken, "FCM tokens are case-sensitive: not lower-cased")
        #expect(ring.device.environment == nil)
        #expect(ring.device.id == "pixel-8")
        #expect(fast == ring, "the fast path takes the common Android ring too, as the same value")

        // Round trip: `platform` written, no `environment`, same bytes again.
        let encoded = try CallRequest.ring(ring).encoded()
        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        #expect(Set((object["device"] as? [String: Any] ?? [:]).keys) == ["platform", "token", "id"])
        try expectRoundTrip(CallRequest.ring(ring), encoded)
        #expect(try ContractCoding.encode(CallRequest.ring(ring)) == encoded, "the writer and JSONEncoder agree")
    }

    @Test func anEventWithoutPlatformIsAnIPhoneAndKeepsItsExactBytes() throws {
        let request = try CallRequest.decode(Data(documentedRing.utf8))
        guard case .ring(let decoded) = request else { Issue.record("expected ring"); return }
        #expect(decoded.device.platform == .ios)
        let encoded = try request.encoded()
        #expect(!String(decoding: encoded, as: UTF8.self).contains("platform"), "iOS events are written as before")
        // An explicit "ios" means the same.
        let explicit = try ring(replacing: ["device", "platform"], with: "ios")
        #expect(try CallRequest.decode(Data(explicit.utf8)) == request)
        #expect(CallRequest.fastRing(Data(explicit.utf8)).map(CallRequest.ring) == request)
    }

    @Test func badDevicesAreRefusedNamingTheFieldOnBothPaths() throws {
        func android(_ device: [String: Any]) throws -> String {
            try ring(replacing: ["device"], with: device)
        }
        let cases: [(String, String)] = [
            (try android(["platform": "android", "token": fcmToken, "environment": "production"]),
             "device.environment: does not apply to android devices (FCM has no environments); leave it out"),
            (try android(["platform": "android", "token": "has space:APA91b"]),
             "device.token: not an FCM registration token (only A-Z a-z 0-9 - _ : . are allowed)"),
            (try android(["platform": "android", "token": "a/b"]),
             "device.token: not an FCM registration token (only A-Z a-z 0-9 - _ : . are allowed)"),
            (try android(["platform": "android", "token": String(repeating: "A", count: 257)]), "device.token: longer than 256 bytes"),
            (try android(["platform": "android", "token": ""]), "device.token: must not be empty"),
            (try android(["platform": "android"]), "device.token: missing"),
            (try android(["platform": "windows", "token": fcmToken]),
             #"device.platform: unknown value "windows" (expected one of "ios", "android")"#),
            // An FCM token sent as an iPhone's (platform forgotten) is refused, not pushed to APNs.
            (try android(["token": fcmToken, "environment": "production"]), "device.token: not hexadecimal"),
            (try android(["platform": "ios", "token": String(repeating: "ab", count: 32)]), "device.environment: missing"),
        ]
        for (json, expected) in cases {
            let (decoded, fast) = bothPaths(json)
            guard case .failure(let error) = decoded else { Issue.record("accepted: \(json)"); continue }
            #expect(error.description == expected, "\(json)")
            #expect(fast == nil, "the fast path accepted what the decoder refuses: \(json)")
        }
    }

    @Test func anAndroidDeviceWithAnEnvironmentBuiltInCodeFailsValidation() throws {
        var ring = try #require(try RingRequest.decodeRing(documentedAndroidRing))
        ring.device.environment = .sandbox
        #expect(throws: ContractError.self) { try ring.validate() }
        ring.device = Device(token: String(repeating: "ab", count: 32), environment: .sandbox)
        ring.device.environment = nil
        #expect(throws: ContractError.self) { try ring.validate() }
    }

    @Test func theFCMDataCarriesThePayloadAsStringsAndReadsBack() throws {
        let ring = try #require(try RingRequest.decodeRing(documentedAndroidRing))
        var withOptionals = ring
        withOptionals.maxDurationSeconds = 300
        withOptionals.hasVideo = true
        withOptionals.attributes = ["rideId": "R-829", "note": "quote \" and ünïcode"]
        for ring in [ring, withOptionals] {
            let payload = VoIPPayload(ring: ring, deviceKey: DeviceKey.make(token: ring.device.token), ackToken: "ack-token")
            let data = try payload.fcmData()
            #expect(data["callId"] == ring.callId)
            #expect(data["hasVideo"] == (ring.hasVideo ? "true" : "false"))
            #expect(data["replay"] == "0")
            #expect(data["ringDeadline"] == "2026-11-21T12:00:30.000Z")
            #expect(data["ackToken"] == "ack-token")
            #expect(data["maxDurationSeconds"] == ring.maxDurationSeconds.map(String.init))
            #expect(try VoIPPayload(fcmData: data) == payload, "an app reading the data gets the payload back")
        }
    }

    @Test func fcmDataOverFCMsLimitIsRefusedBeforeSending() throws {
        var ring = try #require(try RingRequest.decodeRing(documentedAndroidRing))
        ring.attributes = ["a": String(repeating: "x", count: 1_000), "b": String(repeating: "x", count: 1_000),
                           "c": String(repeating: "x", count: 1_000), "d": String(repeating: "x", count: 1_000)]
        let payload = VoIPPayload(ring: ring, deviceKey: "k", ackToken: "t")
        #expect(throws: ContractError.self) { try payload.fcmData() }
        #expect(throws: Never.self) { try payload.encoded() }  // the same ring fits an iPhone's 5120-byte limit
    }

    @Test func statusesCarryFCMDetailsBesideAPNS() throws {
        let status = CallStatus(callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceKey: "k", app: "rider", state: .failed, attempt: 1,
                                at: Date(timeIntervalSince1970: 1_795_262_400), fcm: .init(name: nil, status: 404, errorCode: "UNREGISTERED"),
                                error: .init(code: "UNREGISTERED"), worker: "w")
        let encoded = try status.encoded()
        #expect(encoded == (try ContractCoding.encode(status)))
        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        let fcm = try #require(object["fcm"] as? [String: Any])
        #expect(fcm["errorCode"] as? String == "UNREGISTERED")
        #expect(fcm["status"] as? Int == 404)
        #expect(fcm["name"] is NSNull)
        #expect(try CallStatus.decode(encoded) == status)
        // An iOS status has no `fcm` member at all (its bytes are as before).
        var ios = status
        ios.fcm = nil
        #expect(!String(decoding: try ios.encoded(), as: UTF8.self).contains("fcm"))
    }
}

extension RingRequest {
    static func decodeRing(_ json: String) throws -> RingRequest? {
        guard case .ring(let ring) = try CallRequest.decode(Data(json.utf8)) else { return nil }
        return ring
    }
}
