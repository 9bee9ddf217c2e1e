import CallContract
import CallpushTestSupport
import Foundation
import Hummingbird
import Kafka
import NIOCore
import ServiceLifecycle
import Synchronization
import Testing
@testable import DispatchService
import Locking

/// Webhooks per tenant against real HTTP receivers, fed from the status topic by a consumer group.
@Suite(.serialized) struct WebhookTests {
    struct Received: Sendable {
        var status: CallStatus
        var body: Data
        var eventID: String
        var timestamp: String
        var signature: String
        var query: String?
        var at: ContinuousClock.Instant
        /// The W3C context the POST carried.
        var traceparent: String
    }

    static func header(_ request: Request, _ name: String) -> String {
        request.headers.first { $0.name.canonicalName == name }?.value ?? ""
    }

    /// A real HTTP receiver on a free port recording every accepted POST /hook. `failFirst`
    /// answers each event's first attempt 500; `delay` holds chosen answers back.
    final class Receiver: Sendable {
        let received = Locked<[Received]>([])
        let attempts = Locked<[String: Int]>([:])
        let port: Int
        private let group: ServiceGroup
        private let running: Task<Void, any Error>

        init(failFirst: Bool = false, delay: @escaping @Sendable (CallStatus) -> Duration = { _ in .zero }) async throws {
            let received = self.received, attempts = self.attempts
            let router = Router()
            router.post("/hook") { request, _ -> Response in
                let body = Data(try await request.body.collect(upTo: 65_536).readableBytesView)
                let eventID = WebhookTests.header(request, "x-callpush-event-id")
                let attempt = attempts.withLock { $0[eventID, default: 0] += 1; return $0[eventID]! }
                if failFirst && attempt == 1 { return Response(status: .internalServerError) }
                guard let status = try? CallStatus.decode(body) else { return Response(status: .badRequest) }
                try await Task.sleep(for: delay(status))
                received.withLock {
                    $0.append(Received(status: status, body: body, eventID: eventID, timestamp: WebhookTests.header(request, "x-callpush-timestamp"),
                                       signature: WebhookTests.header(request, "x-callpush-signature"), query: request.uri.query,
                                       at: ContinuousClock.now, traceparent: WebhookTests.header(request, "traceparent")))
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

        func url(query: String? = nil) -> URL { URL(string: "http://127.0.0.1:\(port)/hook" + (query.map { "?\($0)" } ?? ""))! }

        func wait(for count: Int, seconds: Double = 30) async throws -> [Received] {
            let deadline = ContinuousClock.now + .seconds(seconds)
            while received.withLock({ $0.count }) < count, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            return received.withLock { $0 }
        }

        func stop() async {
            await group.triggerGracefulShutdown()
            _ = await running.result
        }
    }

    static let secret = Array("webhook-secret-0123456789".utf8)
    static let otherSecret = Array("other-webhook-secret-9876".utf8)

    static func status(_ callId: String, _ state: CallStatus.State, tenant: String?, attempt: Int = 1) -> CallStatus {
        CallStatus(callId: callId, deviceKey: "k", app: "rider", state: state, attempt: attempt, at: Date(), worker: "w", tenant: tenant)
    }

    /// Writes statuses to the status topic as a worker would (keyed by call id).
    static func publish(_ statuses: [CallStatus], bed: DispatchTestbed) async throws {
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(kafka: DispatchTestbed.kafka(bed.cluster, "worker")), logger: quietLogger)
        for status in statuses {
            _ = try await producer.send(KafkaProducerRecord(topic: bed.topics.status, key: Array(status.callId.utf8), value: Array(try status.encoded())))
        }
        await producer.shutdown()
    }

    /// A first group join on the embedded cluster can take tens of seconds when the whole suite
    /// loads the machine (a join request that times out is retried after 20 s); as the worker
    /// testbed does, the bound is a minute.
    static func waitAssigned(_ app: DispatchApp) async throws {
        let deadline = ContinuousClock.now + .seconds(TestTiming.scaled(seconds: 60))
        while (app.webhooks?.assignedPartitions ?? 0) == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect((app.webhooks?.assignedPartitions ?? 0) > 0, "the webhook consumer joined its group")
    }

    @Test func eachTenantsStatusesGoToItsOwnWebhookSignedWithAnEventIdAndRetried() async throws {
        let first = try await Receiver(failFirst: true)
        let second = try await Receiver()
        let firstURL = first.url(), secondURL = second.url(query: "token=abc%2Fdef")
        try await DispatchTestbed.with(configure: {
            $0.webhooks = ["test": WebhookTarget(url: firstURL, secret: Self.secret), "second": WebhookTarget(url: secondURL, secret: Self.otherSecret)]
            $0.webhookDelivery.groupID = "hooks-\(UUID().uuidString)"
        }) { bed in
            try await Self.waitAssigned(bed.app)
            let call = CallID.make(), other = CallID.make(), none = CallID.make()
            try await Self.publish([Self.status(call, .retrying, tenant: "test"), Self.status(other, .sent, tenant: "second"),
                                    Self.status(none, .sent, tenant: "third"), Self.status(call, .sent, tenant: "test", attempt: 2)], bed: bed)
            let got = try await first.wait(for: 2)
            #expect(got.map(\.status.state) == [.retrying, .sent], "in order within the call")
            #expect(got.allSatisfy { $0.status.callId == call })
            for item in got {
                #expect(item.signature == "sha256=" + WebhookSender.signature(secret: Self.secret, timestamp: item.timestamp, body: item.body))
                #expect(item.eventID.range(of: #"^[0-9]+-[0-9]+$"#, options: .regularExpression) != nil)
                #expect(first.attempts.withLock { $0[item.eventID] } == 2, "the failed first attempt was retried with the same event id")
            }
            #expect(Set(got.map(\.eventID)).count == 2)
            let theirs = try await second.wait(for: 1)
            #expect(theirs.map(\.status.callId) == [other], "another tenant's status goes to its own webhook")
            #expect(theirs.first?.query == "token=abc%2Fdef", "the URL's query is kept")
            #expect(theirs.first?.signature == "sha256=" + WebhookSender.signature(secret: Self.otherSecret, timestamp: theirs[0].timestamp, body: theirs[0].body))
            try await Task.sleep(for: .milliseconds(300))
            #expect(first.received.withLock { $0.count } == 2 && second.received.withLock { $0.count } == 1, "nothing for a tenant without a webhook")
        }
        await first.stop()
        await second.stop()
    }

    @Test func aSlowCallDoesNotHoldUpOthers() async throws {
        let slow = CallID.make()
        let receiver = try await Receiver(delay: { $0.callId == slow && $0.state == .retrying ? .seconds(2) : .zero })
        let url = receiver.url()
        try await DispatchTestbed.with(partitions: 1, configure: {
            $0.webhooks = ["test": WebhookTarget(url: url, secret: Self.secret)]
            $0.webhookDelivery.groupID = "hooks-\(UUID().uuidString)"
        }) { bed in
            try await Self.waitAssigned(bed.app)
            // Calls of other lanes than the slow one (a call shares its lane, and waits, with the calls hashed there).
            var fast: [String] = []
            while fast.count < 5 {
                let id = CallID.make()
                let lanes = bed.app.webhooks.map { _ in WebhookDelivery().concurrency } ?? 1
                if WebhookLanes.lane(of: id, lanes: lanes) != WebhookLanes.lane(of: slow, lanes: lanes) { fast.append(id) }
            }
            try await Self.publish([Self.status(slow, .retrying, tenant: "test"), Self.status(slow, .sent, tenant: "test", attempt: 2)]
                                   + fast.map { Self.status($0, .sent, tenant: "test") }, bed: bed)
            let got = try await receiver.wait(for: 7)
            #expect(got.count == 7)
            let order = got.map(\.status.callId)
            #expect(order.filter { $0 == slow }.count == 2)
            #expect(got.filter { $0.status.callId == slow }.map(\.status.state) == [.retrying, .sent], "in order within the slow call")
            #expect(order.suffix(2) == [slow, slow], "the other calls were posted while the slow one waited (same partition)")
        }
        await receiver.stop()
    }

    @Test func deliveryResumesAfterARestartFromTheCommittedPosition() async throws {
        let receiver = try await Receiver()
        let url = receiver.url()
        let group = "hooks-\(UUID().uuidString)"
        try await DispatchTestbed.with(configure: {
            $0.webhooks = ["test": WebhookTarget(url: url, secret: Self.secret)]
            $0.webhookDelivery.groupID = group
            $0.webhookDelivery.sessionTimeout = .seconds(6)
        }) { bed in
            try await Self.waitAssigned(bed.app)
            let before = CallID.make()
            try await Self.publish([Self.status(before, .sent, tenant: "test")], bed: bed)
            #expect(try await receiver.wait(for: 1).map(\.status.callId) == [before])
            // The instance stops (its position committed on close); statuses keep coming meanwhile.
            await bed.stopDispatch()
            let during = (0..<3).map { _ in CallID.make() }
            try await Self.publish(during.map { Self.status($0, .sent, tenant: "test") }, bed: bed)
            try await Task.sleep(for: .milliseconds(500))
            #expect(receiver.received.withLock { $0.count } == 1)
            try await bed.startDispatch()
            let got = try await receiver.wait(for: 4, seconds: 60)
            #expect(Set(got.map(\.status.callId)) == Set([before] + during), "nothing lost across the restart")
            #expect(got.filter { $0.status.callId == before }.count == 1, "and what was delivered is not posted again")
        }
        await receiver.stop()
    }
}
