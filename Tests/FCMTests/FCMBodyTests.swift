@testable import FCM
import Foundation
import NIOCore
import Testing

@Suite("FCM client: the request body it writes and the answer it reads")
struct FCMBodyTests {
    @Test("the body is FCM's data message, every string escaped as JSON", arguments: [
        "Driver Tanaka",
        "quote \" backslash \\ slash / newline \n tab \t return \r nul \u{0} bell \u{7} unit \u{1F} del \u{7F}",
        "é あ 😀",
        "",
    ])
    func body(_ text: String) throws {
        let message = FCMMessage(
            app: "a", token: "tok:en_1-2.3", data: ["callId": "c1", "displayName": text, text + "k": "v"], collapseKey: "c1\"x",
            deadline: Date().addingTimeInterval(30))
        let buffer = FCMClient.encode(message, ttl: "29.5s")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any])
        #expect(json.count == 1)
        let body = try #require(json["message"] as? [String: Any])
        #expect(Set(body.keys) == ["token", "data", "android"])
        #expect(body["token"] as? String == "tok:en_1-2.3")
        #expect(body["data"] as? [String: String] == message.data)
        let android = try #require(body["android"] as? [String: Any])
        #expect(android.count == 4)
        #expect(android["priority"] as? String == "HIGH")
        #expect(android["ttl"] as? String == "29.5s")
        #expect(android["collapse_key"] as? String == "c1\"x")
        #expect(android["direct_boot_ok"] as? Bool == true)
    }

    @Test("the message name is read from FCM's answer however it is formatted", arguments: [
        (#"{"name":"projects/p/messages/0:1700000000000000%0123456789abcdef"}"#, "projects/p/messages/0:1700000000000000%0123456789abcdef" as String?),
        ("{\n  \"name\": \"projects/p/messages/1\"\n}\n", "projects/p/messages/1"),
        (#"{"name":"projects\/p\/messages\/2"}"#, "projects/p/messages/2"),
        (#"{"other":1,"name":"projects/p/messages/3"}"#, "projects/p/messages/3"),
        (#"{"name":"projects/p/messages/4"} trailing"#, nil),
        (#"{}"#, nil),
    ])
    func messageName(_ answer: String, _ expected: String?) {
        #expect(FCMClient.messageName(ByteBuffer(string: answer)) == expected)
    }
}
