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

    /// The default `apns-id` (drawn without Foundation's `UUID()`, which opens `/dev/urandom` per call):
    /// version 4, RFC 4122 variant, no repeats, every random bit in use.
    @Test func defaultAPNsIDsAreVersion4UUIDsThatDoNotRepeat() {
        let ids = (0..<20_000).map { _ in APNSVoIPPush(app: "a", deviceToken: Self.token, environment: .sandbox, payload: Array("{}".utf8)).apnsID }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(2_000) {
            #expect(id.uuid.6 >> 4 == 4, "version of \(id)")
            #expect(id.uuid.8 >> 6 == 0b10, "variant of \(id)")
        }
        let text = ids.prefix(2_000).map { Array($0.uuidString.utf8) }
        for position in Array(0..<36) where ![8, 13, 14, 18, 19, 23].contains(position) {
            #expect(Set(text.map { $0[position] }).count == 16, "position \(position)")
        }
    }

    @Test func expirationIsSentInUnixSeconds() {
        #expect(APNSExpiration.immediately.headerValue == "0")
        #expect(APNSExpiration.at(Date(timeIntervalSince1970: 1_800_000_000.9)).headerValue == "1800000000")
    }

    @Test func logsShowOnlyATokenPrefix() {
        #expect(tokenPrefix(Self.token) == "ab12ab12…")
    }
}
