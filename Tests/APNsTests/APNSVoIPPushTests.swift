import Foundation
import NIOCore
import Testing

@testable import APNs

@Suite struct APNSVoIPPushTests {
    static let token = String(repeating: "ab12", count: 16)

    @Test func payloadOver5120BytesIsRefusedWithATypedError() {
        let atLimit = APNSVoIPPush(app: "a", deviceToken: Self.token, environment: .sandbox, payload: [UInt8](repeating: 0x20, count: 5120))
        #expect(throws: Never.self) { try atLimit.validate() }
        let over = APNSVoIPPush(app: "a", deviceToken: Self.token, environment: .sandbox, payload: [UInt8](repeating: 0x20, count: 5121))
        #expect(throws: APNSError(.payloadTooLarge, "payload is 5121 bytes, VoIP limit is 5120")) { try over.validate() }
    }

    @Test(arguments: ["", "abc", "zz", "ab cd", "../../x", String(repeating: "a", count: 402)])
    func nonHexDeviceTokensAreRefused(token: String) {
        let push = APNSVoIPPush(app: "a", deviceToken: token, environment: .sandbox, payload: Array("{}".utf8))
        do {
            try push.validate()
            Issue.record("token \(token) should be refused")
        } catch {
            #expect(error.code == .invalidDeviceToken)
        }
    }

    /// Each push gets its own `apns-id` by default (APNs reports and deduplicates by it).
    @Test func defaultAPNSIDsAreRandomVersion4AndDoNotRepeat() {
        let ids = (0..<2_000).map { _ in APNSVoIPPush(app: "a", deviceToken: Self.token, environment: .sandbox, payload: Array("{}".utf8)).apnsID }
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.uuid.6 >> 4 == 4 && $0.uuid.8 >> 6 == 0b10 })
    }

    @Test func expirationIsSentInUnixSeconds() {
        #expect(APNSExpiration.immediately.headerValue == "0")
        #expect(APNSExpiration.at(Date(timeIntervalSince1970: 1_800_000_000.9)).headerValue == "1800000000")
    }

    @Test func logsShowOnlyATokenPrefix() {
        #expect(tokenPrefix(Self.token) == "ab12ab12…")
    }
}
