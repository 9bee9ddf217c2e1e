import Foundation
import Testing
@testable import CallContract

@Suite struct VoIPPayloadContract {
    func ring(attributes: [String: String]) -> RingRequest {
        RingRequest(
            callId: CallID.make(), app: "rider",
            device: Device(token: String(repeating: "ab", count: 32), environment: .sandbox),
            caller: Caller(handle: "driver-1234", displayName: "Driver Tanaka"), hasVideo: true,
            requestedAt: Date(timeIntervalSince1970: 1_795_262_400), ringDeadline: Date(timeIntervalSince1970: 1_795_262_430),
            attributes: attributes)
    }

    @Test func carriesWhatTheAppNeeds() throws {
        let request = ring(attributes: ["rideId": "R-829"])
        let payload = VoIPPayload(ring: request, deviceKey: DeviceKey.make(token: request.device.token), ackToken: "tok")
        let data = try payload.encoded()
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["callId"] as? String == request.callId)
        #expect(object["handle"] as? String == "driver-1234")
        #expect(object["displayName"] as? String == "Driver Tanaka")
        #expect(object["hasVideo"] as? Bool == true)
        #expect(object["ringDeadline"] as? String == "2026-11-21T12:00:30.000Z")
        #expect(object["ackToken"] as? String == "tok")
        #expect((object["attributes"] as? [String: String]) == ["rideId": "R-829"])
        #expect(object["token"] == nil && !String(decoding: data, as: UTF8.self).contains(request.device.token),
                "the device token itself is not in the payload")
        #expect(try VoIPPayload.decode(data) == payload)
    }

    @Test func payloadOverTheVoIPLimitIsRefused() throws {
        var attributes: [String: String] = [:]
        for i in 0..<6 { attributes["k\(i)"] = String(repeating: "x", count: 1000) }
        let payload = VoIPPayload(ring: ring(attributes: attributes), deviceKey: "k", ackToken: "t")
        do {
            _ = try payload.encoded()
            Issue.record("an oversized payload was encoded")
        } catch {
            #expect(error.code == .payloadTooLarge)
            #expect(error.path == "attributes")
        }
    }

    @Test func payloadJustUnderTheLimitIsAccepted() throws {
        let base = try VoIPPayload(ring: ring(attributes: ["a": ""]), deviceKey: "k", ackToken: "t").encoded().count
        let fill = VoIPPayload.maxBytes - base
        let payload = VoIPPayload(ring: ring(attributes: ["a": String(repeating: "x", count: fill)]), deviceKey: "k", ackToken: "t")
        #expect(try payload.encoded().count == VoIPPayload.maxBytes)
    }
}

@Suite struct DeviceKeys {
    /// The key is the first 16 bytes of SHA-256 over the lower-case token: these answers were
    /// computed outside Swift (`printf %s TOKEN | sha256sum`, lower-cased token), so a change of
    /// digest, truncation or case folding would name every device differently and fails here.
    @Test func keyIsTheTruncatedSHA256OfTheLowerCaseToken() {
        // printf %s 740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad | sha256sum
        //   1861d16474b2cc622a280dab56b536d6b9cd90885f21f883315c8a4a54711d56
        let apns = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"
        #expect(DeviceKey.make(token: apns) == "1861d16474b2cc622a280dab56b536d6")
        #expect(DeviceKey.make(token: apns.uppercased()) == "1861d16474b2cc622a280dab56b536d6")
        // An FCM registration token is mixed case: the key is over its lower-case form.
        // printf %s 'cz3zkp9xqkwb1xy7:apa91bhun4mxp5egokmwt2kzfbafuh-1ryqx' | sha256sum
        //   f15103a9be028972e088d933864a24d7c209e9a4980d391068bb989da089589b
        #expect(DeviceKey.make(token: "cZ3ZKp9xQkWb1Xy7:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx") == "f15103a9be028972e088d933864a24d7")
        // printf %s '' | sha256sum; printf %s abc | sha256sum
        #expect(DeviceKey.make(token: "") == "e3b0c44298fc1c149afbf4c8996fb924")
        #expect(DeviceKey.make(token: "ABC") == "ba7816bf8f01cfea414140de5dae2223")
    }

    @Test func keyIsStableCaseInsensitiveAndShort() {
        let token = String(repeating: "ab", count: 32)
        #expect(DeviceKey.make(token: token) == DeviceKey.make(token: token.uppercased()))
        #expect(DeviceKey.make(token: token).count == 32)
        #expect(DeviceKey.make(token: token) != DeviceKey.make(token: String(repeating: "ac", count: 32)))
    }

    @Test func redactedTokenKeepsOnlyAPrefix() {
        let token = String(repeating: "ab", count: 32)
        #expect(Device.redact(token) == "abababab…(64)")
    }
}
