import FCM
import Foundation
import Testing

@Suite("FCM message: TTL, limits and local validation")
struct FCMMessageTests {
    @Test("the TTL is the time left to the deadline in FCM's duration form", arguments: [
        (12.5, "12.5s"), (30, "30s"), (0.007, "0.007s"), (1.25, "1.25s"), (59.999, "59.999s"),
    ])
    func ttlText(_ seconds: Double, _ expected: String) {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(FCMMessage.ttl(until: now.addingTimeInterval(seconds), now: now) == expected)
    }

    @Test("a deadline that passed (or less than a millisecond away) gives no TTL: never negative")
    func ttlNeverNegative() {
        let now = Date()
        #expect(FCMMessage.ttl(until: now.addingTimeInterval(-1), now: now) == nil)
        #expect(FCMMessage.ttl(until: now, now: now) == nil)
        #expect(FCMMessage.ttl(until: now.addingTimeInterval(90 * 24 * 3600), now: now) == "2419200s")
    }

    @Test("4096 bytes of keys and values pass; one more byte is refused before sending")
    func dataLimit() throws {
        var message = FCMTestFixture.message(data: ["k": String(repeating: "x", count: 4095)])
        #expect(message.dataSize == 4096)
        try message.validate()
        message.data = ["kk": String(repeating: "x", count: 4095)]
        #expect(message.dataSize == 4097)
        let error = #expect(throws: FCMError.self, "4097 bytes were accepted") { try message.validate() }
        #expect(error?.code == .dataTooLarge)
        #expect(error?.disposition == .requestInvalid)
        // Multi-byte characters count as their UTF-8 bytes.
        message.data = ["k": String(repeating: "é", count: 2048)]
        #expect(message.dataSize == 4097)
    }

    @Test("reserved keys, bad tokens and empty collapse keys are refused locally",
          arguments: [("from", FCMError.Code.invalidData), ("message_type", .invalidData), ("google.x", .invalidData), ("gcm.n", .invalidData)])
    func reservedKeys(_ key: String, _ code: FCMError.Code) {
        let message = FCMTestFixture.message(data: [key: "v"])
        let error = #expect(throws: FCMError.self, "data key \(key) was accepted") { try message.validate() }
        #expect(error?.code == code)
        #expect(error?.disposition == .requestInvalid)
    }

    @Test("registration tokens: FCM's alphabet only")
    func tokenShape() {
        #expect(FCMRegistrationToken.isValid(FCMTestFixture.token))
        #expect(!FCMRegistrationToken.isValid(""))
        #expect(!FCMRegistrationToken.isValid("has space"))
        #expect(!FCMRegistrationToken.isValid("a/b"))
        #expect(!FCMRegistrationToken.isValid(String(repeating: "a", count: 4097)))
        let message = FCMTestFixture.message(token: "bad token")
        let error = #expect(throws: FCMError.self, "a bad token was accepted") { try message.validate() }
        #expect(error?.code == .invalidRegistrationToken)
        #expect(error?.disposition == .tokenDead)
        #expect(error?.message.contains("bad token") == false)
    }

    @Test("a passed deadline is refused with deadline-passed: nothing is sent, the caller's loop ends it")
    func deadlinePassed() {
        let message = FCMTestFixture.message(seconds: -2)
        let error = #expect(throws: FCMError.self, "a passed deadline was accepted") { try message.validate() }
        #expect(error?.code == .deadlinePassed)
        #expect(error?.wasNotSent == true)
        #expect(error?.isRetryable == false)
    }
}
