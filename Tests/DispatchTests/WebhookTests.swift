import CallContract
import Foundation
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization
import Testing
@testable import DispatchService
import Locking

/// Webhooks against a real HTTP receiver: signed, retried after a failure, in order.
@Suite(.serialized) struct WebhookTests {
    struct Received: Sendable {
        var body: Data
        var timestamp: String
        var signature: String
    }

    static func header(_ request: Request, _ name: String) -> String {
        request.headers.first { $0.name.canonicalName == name }?.value ?? ""
    }

    /// A real HTTP receiver on a free port recording every accepted POST /hook; `failFirst`
    /// answers the first attempt 500 (the sender must retry).
    final class Receiver: Sendable {
        final class Record: Sendable {
            let received = Locked<[Received]>([])
            let attempts = Atomic<Int>(0)
        }
        let record = Record()
        let port: Int
        private let group: ServiceGroup
        private let running: Task<Void, any Error>

        init(failFirst: Bool = false) async throws {
            let record = self.record
            let router = Router()
            router.post("/hook") { request, _ -> Response in
                let body = try await request.body.collect(upTo: 65_536)
                if record.attempts.add(1, ordering: .relaxed).newValue == 1 && failFirst { return Response(status: .internalServerError) }
                record.received.withLock {
                    $0.append(Received(body: Data(body.readableBytesView), timestamp: WebhookTests.header(request, "x-callpush-timestamp"),
                                       signature: WebhookTests.header(request, "x-callpush-signature")))
                }
                return Response(status: .noContent)
            }
            let (ports, portContinuation) = AsyncStream<Int>.makeStream()
            let application = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                                          onServerRunning: { portContinuation.yield($0.localAddress?.port ?? 0) }, logger: quietLogger)
            let group = ServiceGroup(services: [application], logger: quietLogger)
            self.group = group
            running = Task { try await group.run() }
            var portIterator = ports.makeAsyncIterator()
            port = try #require(await portIterator.next())
        }

        var url: URL { URL(string: "http://127.0.0.1:\(port)/hook")! }

        func stop() async {
            await group.triggerGracefulShutdown()
            _ = await running.result
        }
    }

    @Test func statusesOfACallAcceptedHereArePostedEndToEnd() async throws {
        let receiver = try await Receiver()
        let record = receiver.record
        let secret = Array("webhook-secret-0123456789".utf8)
        let url = receiver.url

        try await DispatchTestbed.with(configure: { $0.webhook = WebhookConfiguration(url: url, secret: secret) }) { bed in
            let worker = try await bed.startWorker()
            let callId = CallID.make()
            #expect(try await bed.post("/v1/calls", json(ringBody(callId: callId, tokens: [hexToken(0x400c)]))).status == 202)
            let deadline = ContinuousClock.now + .seconds(30)
            while !record.received.withLock({ $0.contains { (try? CallStatus.decode($0.body))?.state == .sent } }), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            let hooks = record.received.withLock { $0 }
            let sent = try #require(hooks.first { (try? CallStatus.decode($0.body))?.state == .sent })
            #expect(try CallStatus.decode(sent.body).callId == callId)
            #expect(sent.signature == "sha256=" + WebhookSender.signature(secret: secret, timestamp: sent.timestamp, body: sent.body))
            await bed.stop(worker)
        }
        await receiver.stop()
    }

    @Test func statusesArePostedSignedAndRetriedUntilAccepted() async throws {
        let receiver = try await Receiver(failFirst: true)
        let record = receiver.record

        let secret = Array("webhook-secret-0123456789".utf8)
        var configuration = WebhookConfiguration(url: receiver.url, secret: secret)
        configuration.maxAttempts = 3
        let sender = WebhookSender(configuration: configuration, metrics: DispatchMetrics(), logger: quietLogger)
        let senderGroup = ServiceGroup(services: [sender], logger: quietLogger)
        let sending = Task { try await senderGroup.run() }

        let callId = CallID.make()
        let statuses = [CallStatus.State.retrying, .sent].map {
            CallStatus(callId: callId, deviceKey: "k", app: "rider", state: $0, attempt: 1, at: Date(), worker: "w")
        }
        for status in statuses { sender.enqueue(status) }
        let deadline = ContinuousClock.now + .seconds(20)
        while record.received.withLock({ $0.count }) < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }

        let got = record.received.withLock { $0 }
        try #require(got.count == 2)
        #expect(record.attempts.load(ordering: .relaxed) == 3, "the failed first POST was retried")
        #expect(try got.map { try CallStatus.decode($0.body).state } == [.retrying, .sent], "in order")
        for item in got {
            #expect(item.signature == "sha256=" + WebhookSender.signature(secret: secret, timestamp: item.timestamp, body: item.body))
            #expect(abs((Double(item.timestamp) ?? 0) - Date().timeIntervalSince1970) < 60)
        }
        #expect(WebhookSender.signature(secret: Array("other".utf8), timestamp: got[0].timestamp, body: got[0].body) != String(got[0].signature.dropFirst(7)))

        await senderGroup.triggerGracefulShutdown()
        _ = await sending.result
        await receiver.stop()
    }
}
