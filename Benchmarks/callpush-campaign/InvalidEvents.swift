import CallContract
import Foundation
import ProcessStack

/// Malformed and oversized events written straight to `voip.call-requests` with `kcat` (as a
/// misbehaving producer would), each of which must come back on the DLQ with a reason.
struct InvalidEvents: Sendable {
    struct Event: Sendable {
        var name: String
        var key: String
        var value: [UInt8]
    }

    /// A fresh batch; `tag` keeps batches apart.
    static func batch(tag: String) -> [Event] {
        let now = ISO8601DateFormatter().string(from: Date())
        let deadline = ISO8601DateFormatter().string(from: Date().addingTimeInterval(60))
        let token = StackFiles.randomHex(32)
        func ring(_ fields: String) -> [UInt8] { Array(fields.utf8) }
        let bigAttributes = (0..<80).map { "\"a\($0)\":\"\(String(repeating: "x", count: 90))\"" }.joined(separator: ",")
        let events: [(String, [UInt8])] = [
            ("not-json", Array("campaign \(tag): this is not JSON {".utf8)),
            ("missing-fields", ring("{\"type\":\"ring\",\"callId\":\"\(CallID.make())\"}")),
            ("unknown-type", ring("{\"type\":\"dance\",\"callId\":\"\(CallID.make())\"}")),
            ("bad-token", ring("""
                {"type":"ring","callId":"\(CallID.make())","app":"\(Stack.app)",\
                "device":{"token":"zz\(tag)","environment":"sandbox"},"caller":{"handle":"x"},\
                "requestedAt":"\(now)","ringDeadline":"\(deadline)","replay":0}
                """)),
            ("oversized-payload", ring("""
                {"type":"ring","callId":"\(CallID.make())","app":"\(Stack.app)",\
                "device":{"token":"\(token)","environment":"sandbox"},"caller":{"handle":"x"},\
                "requestedAt":"\(now)","ringDeadline":"\(deadline)","replay":0,"attributes":{\(bigAttributes)}}
                """)),
            ("oversized-garbage", Array(("campaign \(tag) " + String(repeating: "\u{1F4DE}garbage", count: 30_000)).utf8)),
            ("binary", (0..<512).map { _ in UInt8.random(in: 0...255) }),
        ]
        return events.map { Event(name: $0.0, key: "campaign-invalid-\(tag)-\($0.0)", value: $0.1) }
    }

    /// Produces each event with `kcat -P` (one file per message).
    static func produce(_ events: [Event], bootstrap: String, directory: String) async throws {
        for event in events {
            let path = "\(directory)/\(event.key).bin"
            guard FileManager.default.createFile(atPath: path, contents: Data(event.value)) else {
                throw StackError("cannot write \(path)")
            }
            let kcat = try ChildProcess(
                name: "kcat", executable: try which("kcat"),
                arguments: ["-P", "-b", bootstrap, "-t", Topics.requests, "-k", event.key, "-X", "message.max.bytes=2000000", path],
                environment: [:], logPath: "\(directory)/kcat.log")
            guard let exit = await kcat.waitForExit(timeout: .seconds(30)), exit == .status(0) else {
                _ = await kcat.stop(timeout: .seconds(1))
                throw StackError("kcat failed for \(event.name) (see \(directory)/kcat.log)")
            }
        }
    }

    /// The events not on the DLQ with a non-empty `callpush-error` and `callpush-reason`.
    static func missing(_ events: [Event], from deadLetters: [OutcomeCollector.DeadLetter]) -> [Event] {
        events.filter { event in
            !deadLetters.contains { letter in
                letter.value == event.value
                    && !(letter.headers[DeadLetterHeader.error] ?? "").isEmpty
                    && !(letter.headers[DeadLetterHeader.reason] ?? "").isEmpty
            }
        }
    }
}
