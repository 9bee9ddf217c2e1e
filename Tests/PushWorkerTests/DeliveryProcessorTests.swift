import CallContract
import CallpushCore
import Foundation
import Testing
@testable import PushWorker

@Suite struct Delivering {
    @Test func ringIsPushedOnceWithTheContractPayloadAndReportedSent() async throws {
        let h = Harness()
        let ring = makeRing()
        #expect(try await h.process(.ring(ring), partition: 5) == .finished(.sent))

        let sent = h.sender.sent
        try #require(sent.count == 1)
        let push = sent[0].push
        #expect(push.deviceToken == ring.device.token)
        #expect(push.environment == .sandbox)
        #expect(push.expiration == ring.ringDeadline)
        #expect(push.apnsID == APNSID.make(callId: ring.callId, deviceKey: DeviceKey.make(token: ring.device.token), replay: 0))
        let payload = try VoIPPayload.decode(push.payload)
        #expect(payload.callId == ring.callId)
        #expect(payload.handle == "driver-1")
        #expect(try AckTokenSigner(secret: testSecret).verify(payload.ackToken, callId: ring.callId, deviceKey: payload.deviceKey))

        #expect(h.publisher.states == [.sent])
        #expect(h.publisher.partitions == [5], "status goes to the request's partition number")
        let status = try #require(h.publisher.statuses.first)
        #expect(status.attempt == 1)
        #expect(status.deviceId == "dev-1")
        #expect(status.apns?.status == 200)
        #expect(status.worker == "test-worker")
        #expect(h.publisher.deadLetters.isEmpty)
    }

    @Test func pastDeadlineIsExpiredWithoutPush() async throws {
        let h = Harness()
        let ring = makeRing(ringsFor: -1)
        #expect(try await h.process(.ring(ring)) == .finished(.expired))
        #expect(h.sender.sent.isEmpty)
        #expect(h.publisher.states == [.expired])
    }

    @Test func redeliveredEventIsADuplicateButAReplayRingsAgain() async throws {
        let h = Harness()
        let ring = makeRing()
        #expect(try await h.process(.ring(ring)) == .finished(.sent))
        #expect(try await h.process(.ring(ring), offset: 101) == .finished(.duplicate))
        #expect(h.sender.sent.count == 1)
        var replayed = ring
        replayed.replay = 1
        #expect(try await h.process(.ring(replayed), offset: 102) == .finished(.sent))
        #expect(h.sender.sent.count == 2)
        #expect(h.publisher.states == [.sent, .duplicate, .sent])
    }

    @Test func aSentDeliveryRedeliveredAfterItsDeadlineIsADuplicateNotExpired() async throws {
        let clock = ManualClock()
        let h = Harness(now: { clock.now() })
        let ring = makeRing(ringsFor: 5)
        #expect(try await h.process(.ring(ring)) == .finished(.sent))
        clock.advance(by: 60)  // Kafka redelivers it (rebalance before the offset was committed) after the deadline
        #expect(try await h.process(.ring(ring), offset: 101) == .finished(.duplicate), "the phone rang: not expired")
        #expect(h.publisher.states == [.sent, .duplicate])
        #expect(h.sender.sent.count == 1)
    }

    @Test func unregisteredTokenFailsWithReasonTimestampAndDeadLetter() async throws {
        let h = Harness()
        let ring = makeRing()
        h.sender.script(ring.device.token, [.unregistered])
        #expect(try await h.process(.ring(ring), partition: 2, offset: 77) == .finished(.failed))
        let status = try #require(h.publisher.statuses.last)
        #expect(status.state == .failed)
        #expect(status.error?.code == "Unregistered")
        #expect(status.apns?.status == 410)
        #expect(status.apns?.timestamp == Date(timeIntervalSince1970: 1_795_262_000))
        let dlq = try #require(h.publisher.deadLetters.first)
        #expect(dlq.headers["callpush-error"] == "Unregistered")
        #expect(dlq.headers["callpush-attempts"] == "1")
        #expect(dlq.headers["callpush-original-partition"] == "2")
        #expect(dlq.headers["callpush-original-offset"] == "77")
        #expect(dlq.headers["callpush-failed-at"].flatMap(ContractCoding.parseTimestamp) != nil)
        #expect(try CallRequest.decode(dlq.value) == .ring(ring), "the DLQ keeps the original request")
        #expect(h.sender.sent.count == 1, "a dead token is not retried")
    }

    @Test func unavailableIsRetriedThenSentBeforeTheDeadline() async throws {
        let clock = ManualClock()  // the deadline is judged on a clock that a loaded machine cannot push past it
        let h = Harness(sender: ScriptedSender(now: { clock.now() }), now: { clock.now() })
        let ring = makeRing(ringsFor: 10)
        h.sender.script(ring.device.token, [.unavailable, .unavailable, .unavailable])
        #expect(try await h.process(.ring(ring)) == .finished(.sent))
        #expect(h.publisher.states == [.retrying, .retrying, .retrying, .sent])
        #expect(h.publisher.statuses.map(\.attempt) == [1, 2, 3, 4])
        #expect(h.sender.sent.count == 4)
        #expect(h.sender.sent.allSatisfy { $0.at < ring.ringDeadline })
    }

    @Test func outageLongerThanTheDeadlineEndsExpiredWithNoPushAfterIt() async throws {
        let h = Harness(sender: ScriptedSender(fallback: .unavailable),
                        retry: RetryPolicy(base: .milliseconds(20), cap: .milliseconds(50), maxAttempts: 1000, minimumRemaining: .milliseconds(5)))
        let ring = makeRing(ringsFor: 1.5)
        #expect(try await h.process(.ring(ring)) == .finished(.expired))
        #expect(h.publisher.states.last == .expired)
        #expect(h.publisher.states.dropLast().allSatisfy { $0 == .retrying })
        #expect(!h.sender.sent.isEmpty)
        #expect(h.sender.sent.allSatisfy { $0.at <= ring.ringDeadline }, "no push after the ring deadline")
        #expect(h.sender.sent.allSatisfy { $0.push.deadline <= ring.ringDeadline }, "no attempt may outlive the deadline")
    }

    @Test func expiredProviderTokenRenewsOnceAndRetries() async throws {
        let h = Harness()
        let ring = makeRing()
        h.sender.script(ring.device.token, [.expiredProviderToken])
        #expect(try await h.process(.ring(ring)) == .finished(.sent))
        #expect(h.sender.sent.count == 2, "retried at once: the client has renewed the token")
        #expect(h.publisher.states == [.retrying, .sent])

        let again = makeRing(token: String(repeating: "cd", count: 32))
        h.sender.script(again.device.token, [.expiredProviderToken, .expiredProviderToken])
        #expect(try await h.process(.ring(again)) == .finished(.failed), "a second expiry right after renewal is a credentials problem")
        #expect(h.sender.sent.count == 4)
        #expect(h.publisher.statuses.last?.error?.code == "ExpiredProviderToken")
    }

    @Test func unknownAppIsRejected() async throws {
        let h = Harness()
        #expect(try await h.process(.ring(makeRing(app: "driver"))) == .finished(.rejected))
        #expect(h.sender.sent.isEmpty)
        #expect(h.publisher.deadLetters.first?.headers["callpush-reason"] == #"app: unknown app "driver""#)
    }

    @Test func outcomeIsOnlyFinishedOnceTheStatusIsDurable() async throws {
        let h = Harness(publisher: RecordingPublisher(failFirst: 3))
        #expect(try await h.process(.ring(makeRing())) == .finished(.sent))
        #expect(h.publisher.states == [.sent])
        #expect(h.sender.sent.count == 1, "a failing status write does not push again")
    }

    @Test func aStatusWriteFailingLongerThanTheOutcomeBoundKeepsGoingWhileTheDeliveryIsNotCancelled() async throws {
        // 4 failures take 50 + 100 + 200 + 400 ms of back-off, past the 100 ms bound. The bound is for a
        // cancelled delivery (revoke, shutdown); handing this one back would strand it: nobody redoes
        // an event while this worker keeps its partition.
        let h = Harness(publisher: RecordingPublisher(failFirst: 4), outcomeWriteBound: .milliseconds(100))
        #expect(try await h.process(.ring(makeRing())) == .finished(.sent))
        #expect(h.publisher.states == [.sent])
        #expect(h.sender.sent.count == 1)
    }

    @Test func aCancelledDeliveryWhosePushWentOutStillWritesItsOutcomeWithinTheBound() async throws {
        let sender = ScriptedSender()
        let h = Harness(sender: sender, publisher: RecordingPublisher(failFirst: 3), outcomeWriteBound: .seconds(5))
        let task = Task { try await h.process(.ring(makeRing())) }
        while sender.sent.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        task.cancel()  // e.g. a revoke past the drain bound, while the status write is being retried
        #expect(try await task.value == .finished(.sent), "the push went out: its outcome is recorded")
        #expect(h.publisher.states == [.sent])
        #expect(sender.sent.count == 1)
    }
}

@Suite struct Cancelling {
    @Test func cancelBeforeThePushMeansNoPush() async throws {
        let h = Harness()
        let ring = makeRing()
        #expect(try await h.process(.cancel(CancelRequest(callId: ring.callId, requestedAt: Date()))) == .finished(.cancelled))
        #expect(try await h.process(.ring(ring)) == .finished(.cancelled))
        #expect(h.sender.sent.isEmpty)
        #expect(h.publisher.states == [.cancelled])
        #expect(h.publisher.cancelMarkers.map(\.callId) == [ring.callId], "the cancel is recorded for the next owner")
    }

    /// The consume loop takes in events in topic order and runs their deliveries concurrently: a
    /// cancel taken in before its ring wins even when the ring's delivery runs first.
    @Test func aCancelTakenInFirstWinsWhateverOrderTheDeliveriesRunIn() async throws {
        let h = Harness()
        let ring = makeRing()
        func event(_ request: CallRequest, offset: Int64) throws -> InboundEvent {
            InboundEvent(partition: 0, offset: offset, key: Array(request.callId.utf8), value: Array(try request.encoded()))
        }
        let cancelEvent = try event(.cancel(CancelRequest(callId: ring.callId, requestedAt: Date())), offset: 1)
        let ringEvent = try event(.ring(ring), offset: 2)
        let cancelIntake = h.processor.intake(cancelEvent)
        let ringIntake = h.processor.intake(ringEvent)
        #expect(await h.processor.process(ringIntake, event: ringEvent) == .finished(.cancelled))
        #expect(await h.processor.process(cancelIntake, event: cancelEvent) == .finished(.cancelled))
        #expect(h.sender.sent.isEmpty)
    }

    @Test func cancelDuringRetryBackoffStopsTheDelivery() async throws {
        let h = Harness(sender: ScriptedSender(fallback: .unavailable),
                        retry: RetryPolicy(base: .seconds(5), cap: .seconds(5), maxAttempts: 10, minimumRemaining: .milliseconds(5)))
        let ring = makeRing(ringsFor: 60)
        async let result = h.process(.ring(ring))
        while h.publisher.states.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        _ = try await h.process(.cancel(CancelRequest(callId: ring.callId, requestedAt: Date())), offset: 101)
        #expect(try await result == .finished(.cancelled))
        #expect(h.publisher.states == [.retrying, .cancelled])
        #expect(h.sender.sent.count == 1)
    }

    @Test func cancelAfterSentLeavesItSent() async throws {
        let h = Harness()
        let ring = makeRing()
        #expect(try await h.process(.ring(ring)) == .finished(.sent))
        _ = try await h.process(.cancel(CancelRequest(callId: ring.callId, requestedAt: Date())), offset: 101)
        #expect(h.publisher.states == [.sent])
    }

    @Test func shutdownDuringBackoffHandsTheEventBack() async throws {
        let h = Harness(sender: ScriptedSender(fallback: .unavailable),
                        retry: RetryPolicy(base: .seconds(5), cap: .seconds(5), maxAttempts: 10, minimumRemaining: .milliseconds(5)))
        let ring = makeRing(ringsFor: 60)
        let task = Task { try await h.process(.ring(ring)) }
        while h.publisher.states.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        task.cancel()
        #expect(try await task.value == .handedBack)
        let terminal = h.publisher.states.filter(\.isTerminal)
        #expect(terminal.isEmpty, "no terminal status: the next owner finishes it")
    }

    @Test func aHandedBackDeliveryIsPushedWhenItsEventComesAgainNotAnsweredDuplicate() async throws {
        let sender = ScriptedSender()
        let h = Harness(sender: sender,
                        retry: RetryPolicy(base: .seconds(5), cap: .seconds(5), maxAttempts: 10, minimumRemaining: .milliseconds(5)))
        let ring = makeRing(ringsFor: 60)
        sender.script(ring.device.token, [PushAttempt(disposition: .retry, status: 503, reason: "ServiceUnavailable")])
        let task = Task { try await h.process(.ring(ring)) }
        while h.publisher.states.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        task.cancel()
        #expect(try await task.value == .handedBack)
        // The same event again on this worker (e.g. a second copy, or after the partition came back):
        // nothing recorded an outcome for it, so it must ring, not be answered `duplicate`.
        #expect(try await h.process(.ring(ring), offset: 101) == .finished(.sent))
        #expect(h.publisher.states == [.retrying, .sent])
    }
}

@Suite struct Rejecting {
    func process(_ h: Harness, key: String?, value: String) async -> DeliveryResult {
        await h.processor.process(InboundEvent(partition: 1, offset: 9, key: key.map { Array($0.utf8) }, value: Array(value.utf8)))
    }

    @Test func malformedJSONGoesToTheDLQWithReasonAndARejectedStatus() async throws {
        let h = Harness()
        let callId = CallID.make()
        #expect(await process(h, key: callId, value: "{not json") == .finished(.rejected))
        let dlq = try #require(h.publisher.deadLetters.first)
        #expect(dlq.headers["callpush-error"] == "malformed-json")
        #expect(dlq.headers["callpush-reason"] == "malformed JSON")
        #expect(dlq.value == Array("{not json".utf8))
        #expect(h.publisher.statuses.first?.callId == callId)
        #expect(h.publisher.statuses.first?.state == .rejected)
        #expect(h.publisher.statuses.first?.error?.code == "malformed-json")
    }

    @Test func invalidFieldIsNamedInTheDLQ() async throws {
        let h = Harness()
        var object = try #require(try JSONSerialization.jsonObject(with: try CallRequest.ring(makeRing()).encoded()) as? [String: Any])
        object["device"] = ["token": "zz", "environment": "sandbox"]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
        #expect(await process(h, key: nil, value: json) == .finished(.rejected))
        #expect(h.publisher.deadLetters.first?.headers["callpush-reason"] == "device.token: not hexadecimal")
        #expect(h.publisher.statuses.isEmpty, "without a readable key there is no call to report on")
        #expect(h.sender.sent.isEmpty)
    }

    @Test func binaryGarbageDoesNotCrash() async {
        let h = Harness()
        var generator = SystemRandomNumberGenerator()
        for i in 0..<200 {
            let bytes = (0..<Int.random(in: 0...300, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let result = await h.processor.process(InboundEvent(partition: 0, offset: Int64(i), key: bytes.isEmpty ? nil : Array(bytes.prefix(8)), value: bytes))
            #expect(result == .finished(.rejected))
        }
        #expect(h.publisher.deadLetters.count == 200)
    }
}

@Suite struct APNSIDText {
    /// The sender reads the delivery's apns-id into the UUID it sends without `sscanf`; it must
    /// read what `UUID(uuidString:)` reads, and refuse what it refuses.
    @Test func theSenderReadsApnsIDsAsFoundationDoes() {
        var texts = (0..<200).map { APNSID.make(callId: CallID.make(), deviceKey: "k\($0)", replay: $0 % 3) }
        texts += texts.prefix(20).map { $0.uppercased() }
        texts += ["", "not-a-uuid", "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633", "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633bb",
                  "1b4e28ba2fa1-4d3b-a3f5-ef19b5a7633bb", "1b4e28ba-2fa1-4d3b-a3f5+ef19b5a7633b", "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633g",
                  "g b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633"]
        for text in texts {
            #expect(APNSPushSender.uuid(text) == UUID(uuidString: text), "\(text)")
        }
    }
}
