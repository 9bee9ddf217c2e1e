import CallContract
import CallpushTestSupport
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Locking
import Testing
@testable import CallpushCLI

/// `callpush send` against a small in-test HTTP server standing in for dispatch: it checks the
/// request (method, path, bearer, JSON) and answers as dispatch's API is agreed to.
@Suite(.serialized) struct Send {
    final class FakeDispatch: Sendable {
        struct Recorded: Sendable {
            var method: String
            var path: String
            var authorization: String?
            var bodyText: String?
            var body: [String: Any]? { bodyText.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] } }
        }
        let requests = Locked<[Recorded]>([])
        let finalState: String
        init(finalState: String) { self.finalState = finalState }

        var recorded: [Recorded] { requests.withLock { $0 } }

        func record(_ request: Request, body: ByteBuffer?) {
            let entry = Recorded(method: request.method.rawValue, path: request.uri.path, authorization: request.headers[.authorization],
                                 bodyText: body.map { String(decoding: $0.readableBytesView, as: UTF8.self) })
            requests.withLock { $0.append(entry) }
        }

        func router() -> Router<BasicRequestContext> {
            let router = Router()
            router.post("/v1/calls") { request, _ -> Response in
                let body = try await request.body.collect(upTo: 1 << 16)
                self.record(request, body: body)
                guard request.headers[.authorization] == "Bearer test-key-123" else {
                    return Self.json(.unauthorized, #"{"type":"https://callpush.dev/problems/unauthorized","title":"Unauthorized","status":401,"detail":"unknown API key"}"#)
                }
                let object = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]) ?? [:]
                let callId = object["callId"] as? String ?? "?"
                return Self.json(.accepted, #"{"callId":"\#(callId)","app":"rider","deliveries":[{"deviceKey":"k1","environment":"sandbox","state":"queued"}]}"#)
            }
            router.get("/v1/calls/{id}/events") { request, context -> Response in
                self.record(request, body: nil)
                let id = context.parameters.get("id") ?? "?"
                let stream = "event: status\ndata: {\"callId\":\"\(id)\",\"state\":\"\(self.finalState)\"}\n\nevent: end\ndata: {}\n\n"
                return Response(status: .ok, headers: [.contentType: "text/event-stream"], body: .init(byteBuffer: ByteBuffer(string: stream)))
            }
            router.get("/v1/calls/{id}") { request, context -> Response in
                self.record(request, body: nil)
                let id = context.parameters.get("id") ?? "?"
                return Self.json(.ok, #"{"callId":"\#(id)","complete":true,"deliveries":[{"deviceKey":"k1","state":"\#(self.finalState)","attempt":1,"replay":0}]}"#)
            }
            return router
        }

        static func json(_ status: HTTPResponse.Status, _ text: String) -> Response {
            Response(status: status, headers: [.contentType: status.code >= 400 ? "application/problem+json" : "application/json"],
                     body: .init(byteBuffer: ByteBuffer(string: text)))
        }
    }

    /// Runs `body` with a fake dispatch listening on a free port.
    func withDispatch(finalState: String = "sent", _ body: (FakeDispatch, Int) async throws -> Void) async throws {
        let fake = FakeDispatch(finalState: finalState)
        let port = Locked<Int?>(nil)
        var logger = Logger(label: "fake-dispatch")
        logger.logLevel = .critical
        let app = Application(router: fake.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port } }, logger: logger)
        try await withRunning([app], logger: logger) {
            // Generous: the whole suite runs in parallel on 2 cores.
            let deadline = ContinuousClock.now + .seconds(60)
            while port.withLock({ $0 }) == nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            let bound = try #require(port.withLock { $0 }, "the fake dispatch started")
            try await body(fake, bound)
        }
    }

    func keyFile(_ key: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("api-key-\(UUID().uuidString)").path
        try (key + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    let token = String(repeating: "c0ffee", count: 11)

    @Test func postsOneRingWithTheBearerKeyAndPrintsTheAnswer() async throws {
        try await withDispatch { fake, port in
            let output = CapturedOutput()
            let callId = CallID.make()
            let command = try parse(SendCommand.self, ["send", "--url", "http://127.0.0.1:\(port)", "--api-key-file", try keyFile("test-key-123"),
                                                       "--app", "rider", "--token", token, "--environment", "sandbox", "--call-id", callId,
                                                       "--device-id", "phone-9", "--display-name", "Driver Tanaka"])
            let status = try await command.execute(environment: [:], output: output.output)
            #expect(status == 0)
            #expect(output.out.first?.contains(callId) == true)
            let request = try #require(fake.recorded.first)
            #expect(request.method == "POST" && request.path == "/v1/calls")
            #expect(request.authorization == "Bearer test-key-123", "the key file's content, trimmed")
            let body = try #require(request.body)
            #expect(body["callId"] as? String == callId && body["app"] as? String == "rider" && body["ringTimeoutSeconds"] as? Int == 30)
            let device = try #require((body["devices"] as? [[String: Any]])?.first)
            #expect(device["token"] as? String == token && device["environment"] as? String == "sandbox" && device["id"] as? String == "phone-9")
            #expect((body["caller"] as? [String: Any])?["displayName"] as? String == "Driver Tanaka")
        }
    }

    @Test func anAndroidDeviceIsSentWithItsPlatformAndVerbatimTokenAndNoEnvironment() async throws {
        try await withDispatch { fake, port in
            let fcmToken = "cXk9Zq3RTpu0:APA91bHqL0v_3Zr9Xw2yKpT6nS1dF4gH7jK0lM3nB6vC9xZ2aQ5wE8rT1yU4iO7pA0sD3fG6hJ9kL2zX5cV8bN1mQ4wE7r"
            let command = try parse(SendCommand.self, ["send", "--url", "http://127.0.0.1:\(port)", "--app", "rider",
                                                       "--platform", "android", "--token", fcmToken])
            let status = try await command.execute(environment: ["CALLPUSH_API_KEY": "test-key-123"], output: CapturedOutput().output)
            #expect(status == 0)
            let body = try #require(fake.recorded.first?.body)
            let device = try #require((body["devices"] as? [[String: Any]])?.first)
            #expect(device["platform"] as? String == "android")
            #expect(device["token"] as? String == fcmToken, "not lower-cased: FCM tokens are case-sensitive")
            #expect(device["environment"] == nil)
        }
        #expect(throws: (any Error).self, "an FCM token with a slash is refused") {
            _ = try parse(SendCommand.self, ["send", "--url", "http://127.0.0.1:1", "--app", "rider", "--platform", "android", "--token", "a/b"])
        }
        #expect(throws: (any Error).self) {
            _ = try parse(SendCommand.self, ["send", "--url", "http://127.0.0.1:1", "--app", "rider", "--platform", "web", "--token", token])
        }
    }

    @Test func waitFollowsTheEventsAndFailsUnlessTheCallWasDelivered() async throws {
        try await withDispatch { fake, port in
            let output = CapturedOutput()
            let command = try parse(SendCommand.self, ["send", "--url", "http://127.0.0.1:\(port)", "--app", "rider", "--token", token, "--wait"])
            let status = try await command.execute(environment: ["CALLPUSH_API_KEY": "test-key-123"], output: output.output)
            #expect(status == 0)
            #expect(fake.recorded.map(\.method) == ["POST", "GET", "GET"])
            #expect(output.out.contains { $0.contains(#""state":"sent""#) })
        }
        try await withDispatch(finalState: "failed") { _, port in
            let command = try parse(SendCommand.self, ["send", "--url", "http://127.0.0.1:\(port)", "--app", "rider", "--token", token, "--wait"])
            let error = await #expect(throws: CLIError.self) {
                _ = try await command.execute(environment: ["CALLPUSH_API_KEY": "test-key-123"], output: CapturedOutput().output)
            }
            #expect(error?.message.contains("ended: failed") == true)
        }
    }

    @Test func aRefusedKeyIsOneClearLineFromTheProblem() async throws {
        try await withDispatch { _, port in
            let command = try parse(SendCommand.self, ["send", "--url", "http://127.0.0.1:\(port)", "--app", "rider", "--token", token])
            let error = await #expect(throws: CLIError.self) {
                _ = try await command.execute(environment: ["CALLPUSH_API_KEY": "wrong"], output: CapturedOutput().output)
            }
            let message = error?.message ?? ""
            #expect(message == "POST /v1/calls: dispatch answered 401 Unauthorized: unknown API key")
        }
    }

    @Test func noKeyAndAnUnreachableDispatchAreClearErrors() async throws {
        let command = try parse(SendCommand.self, ["send", "--url", "http://127.0.0.1:1", "--app", "rider", "--token", token, "--timeout", "2s"])
        let error = await #expect(throws: CLIError.self) {
            _ = try await command.execute(environment: [:], output: CapturedOutput().output)
        }
        #expect(error?.message.contains("no API key") == true)
        let unreachable = await #expect(throws: CLIError.self) {
            _ = try await command.execute(environment: ["CALLPUSH_API_KEY": "k"], output: CapturedOutput().output)
        }
        #expect(unreachable?.exitCode == CLIExit.unavailable)
    }

    @Test func eventStreamsSplitAcrossChunksAreReassembled() {
        let splitter = SSELineSplitter()
        #expect(splitter.feed(Array("event: sta".utf8)).isEmpty)
        #expect(splitter.feed(Array("tus\ndata: {\"a\":1}\n\nevent: end\r\n".utf8)) == [.init(name: "status", data: #"{"a":1}"#)])
        #expect(splitter.feed(Array("\r\n".utf8)) == [.init(name: "end", data: "")])
    }
}
