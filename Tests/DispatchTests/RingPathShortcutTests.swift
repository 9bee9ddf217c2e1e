import CallContract
import HTTPTypes
import Hummingbird
import Testing
@testable import DispatchService

/// The ring path's shortcuts give the answers of the slower code they stand in for.
@Suite struct RingPathShortcutTests {
    /// dispatch derives a ring's device keys with swift-crypto's SHA-256 (the contract's own digest
    /// is portable Swift, several times slower): the keys must be the contract's, byte for byte,
    /// or a status, an ack or a dedupe entry would name another device.
    @Test func dispatchsDeviceKeysAreTheContracts() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefABCDEF:_-xyzXYZ")
        // Every length across SHA-256's padding boundaries (55/56/64 bytes), APNs tokens (64 hex
        // digits, either case) and FCM registration tokens (~150 characters, mixed case).
        for length in Array(0...130) + [152, 163, 200, 4096] {
            for _ in 0..<3 {
                let token = String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
                #expect(DeviceKey.fromToken(token) == DeviceKey.make(token: token), "token of \(length) characters")
            }
        }
        // A known digest: SHA-256("abc") begins ba7816bf8f01cfea414140de5dae2223.
        #expect(DeviceKey.fromToken("ABC") == "ba7816bf8f01cfea414140de5dae2223")
    }

    /// The attributes' control-character check skips the Unicode property lookup for ASCII; every
    /// scalar must get the general category's answer (Cc), C1 controls and DEL included.
    @Test func theControlCheckIsTheGeneralCategorys() {
        let scalars = (0..<0x3000).compactMap(Unicode.Scalar.init) + [0xFEFF, 0x1F600, 0xE0001].compactMap(Unicode.Scalar.init)
        for scalar in scalars {
            let expected = scalar.properties.generalCategory == .control
            #expect(CallSubmission.hasControl("a" + String(scalar) + "b") == expected, "U+\(String(scalar.value, radix: 16))")
        }
        #expect(!CallSubmission.hasControl(""))
    }

    /// The key is read from the `Authorization` field without `HTTPFields`' joined copy; the value
    /// must be the subscript's whatever the fields (none, one, several: joined, never a valid key).
    @Test func theAuthorizationValueIsTheSubscripts() {
        for values in [[], ["Bearer a"], [""], ["Bearer a", "Bearer b"], ["bearer x", "", "Bearer y"]] {
            var fields: HTTPFields = [.contentType: "application/json"]
            for value in values { fields.append(HTTPField(name: .authorization, value: value)) }
            fields.append(HTTPField(name: .contentLength, value: "2"))
            #expect(DispatchAPI.authorizationHeader(fields) == fields[.authorization], "\(values)")
        }
    }
}
