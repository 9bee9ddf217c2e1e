import CallContract
import CallpushTestSupport
import Foundation
import Testing
@testable import DispatchService

/// Server-Sent Events within bounds: capped streams, bounded buffers, a limit that holds while a
/// write is blocked, and ids a client can resume from.
@Suite struct SSELimitsTests {
    static func status(_ callId: String, token: Int, state: CallStatus.State, attempt: Int = 1) -> CallStatus {
        CallStatus(callId: callId, deviceId: "dev-0", deviceKey: DeviceKey.make(token: hexToken(token)), app: "rider", state: state,
                   attempt: attempt, at: Date(), worker: "w", tenant: "test")
    }

    @Test func streamsAreCappedPerKey() async throws {
        var configuration = testConfiguration()
        configuration.eventStreamsPerKey = 2
        configuration.eventStreamLimit = .seconds(3)
        try await APIHarness.with(configuration) { h in
            let callId = CallID.make()
            #expect(try await h.post("/v1/calls", json(ringBody(callId: callId))).status == 202)
            let open = (0..<2).map { _ in Task { try await h.get("/v1/calls/\(callId)/events") } }
            var opened = false
            for _ in 0..<100 where !opened {
                opened = h.api.view.subscriberCount == 2
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(opened)
            let refused = try await h.get("/v1/calls/\(callId)/events")
            #expect(refused.status == 429)
            #expect(refused.json["type"] as? String == "https://callpush.dev/problems/too-many-streams")
            #expect(refused.headers["retry-after"] != nil)
            for stream in open { #expect(try await stream.value.status == 200) }
            #expect(try await h.get("/v1/calls/\(callId)/events").status == 200, "a slot is free again once a stream ended")
        }
    }

    @Test func everyStatusHasAnIdAndAResumeGetsOnlyNewerOnes() async throws {
        try await APIHarness.with { h in
            let callId = CallID.make()
            #expect(try await h.post("/v1/calls", json(ringBody(callId: callId, tokens: [hexToken(1), hexToken(2)]))).status == 202)
            h.api.view.apply(status: Self.status(callId, token: 1, state: .sent), partition: 0, offset: 40)
            h.api.view.apply(status: Self.status(callId, token: 2, state: .retrying), partition: 0, offset: 41)
            h.api.view.apply(status: Self.status(callId, token: 2, state: .sent, attempt: 2), partition: 0, offset: 44)
            let all = try await h.get("/v1/calls/\(callId)/events")
            #expect(all.text.hasPrefix("retry: "))
            #expect(Self.ids(all.text) == [40, 44], "the latest status of each delivery, each with its id")
            #expect(EndToEndTests.sseEvents(all.text).last?.data == "{\"complete\":true}")
            let resumed = try await h.get("/v1/calls/\(callId)/events", headers: testAuth.merging(["Last-Event-ID": "40"]) { $1 })
            #expect(Self.ids(resumed.text) == [44])
            let finished = try await h.get("/v1/calls/\(callId)/events", headers: testAuth.merging(["Last-Event-ID": "44"]) { $1 })
            #expect(finished.status == 204, "a finished call resumed at its end: the client stops reconnecting")
        }
    }

    @Test func aReaderThatNeverReadsHoldsABoundedBufferAndLosesTheStreamAtItsLimit() async throws {
        var configuration = testConfiguration()
        configuration.eventStreamLimit = .seconds(1)
        configuration.eventStreamBufferBytes = 16 << 10
        try await APIHarness.with(configuration) { h in
            let callId = CallID.make()
            #expect(try await h.post("/v1/calls", json(ringBody(callId: callId))).status == 202)
            let socket = try RawSocket(port: h.port, receiveTimeout: .seconds(1))
            await socket.send("GET /v1/calls/\(callId)/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(testKey)\r\n\r\n")
            var subscribed = false
            for _ in 0..<100 where !subscribed {
                subscribed = h.api.view.subscriberCount == 1
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(subscribed)
            // Far more than the socket buffers hold: the server's writes block, its buffer must not grow.
            let retrying = Self.status(callId, token: 0xabc, state: .retrying)
            for index in 0..<30_000 {
                // Let the writer keep up until the socket buffers are full and its write blocks.
                if index % 100 == 0 { try await Task.sleep(for: .milliseconds(1)) }
                var status = retrying
                status.attempt = index + 1
                status.error = .init(code: "TooManyRequests", message: String(repeating: "m", count: 200))
                h.api.view.apply(status: status, partition: 0, offset: Int64(index))
            }
            var ended = false
            for _ in 0..<200 where !ended {
                ended = h.api.view.subscriberCount == 0
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(ended, "the stream ended within the limit plus the close grace although its writes were blocked")
            #expect(await socket.waitUntilClosed(within: .seconds(10)), "and its connection with it")
        }
    }

    @Test func anEventBufferDropsTheOldestFramesBeyondItsBytes() async {
        let buffer = EventBuffer(limit: 1_000)
        for index in 0..<10_000 { buffer.push(StatusView.frame(id: Int64(index), status: Self.status(CallID.make(), token: 1, state: .retrying))) }
        #expect(buffer.bytes <= 1_000)
        #expect(buffer.dropped > 9_000)
        buffer.finish(complete: false)
        var last: EventBuffer.Item?
        while let item = await buffer.next() { last = item }
        #expect(last == .end(complete: false), "the end is never dropped")
    }

    static func ids(_ text: String) -> [Int64] {
        text.split(separator: "\n").filter { $0.hasPrefix("id: ") }.compactMap { Int64($0.dropFirst(4)) }
    }
}
