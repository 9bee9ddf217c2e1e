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
    @Test func sha256MatchesPublishedVectors() {
        #expect(DeviceKey.hex(SHA256Digest.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(DeviceKey.hex(SHA256Digest.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(DeviceKey.hex(SHA256Digest.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
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
