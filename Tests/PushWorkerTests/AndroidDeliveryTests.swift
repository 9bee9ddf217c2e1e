import APNsSimulator
import CallContract
import CallpushCore
import CallpushTestSupport
import FCM
import FCMSimulator
import Foundation
import Kafka
import Logging
import Testing
@testable import PushWorker

/// An FCM simulator with a generated service account and an FCM client that trusts its CA.
struct FCMHarness {
    /// One service account for the whole run (2048-bit RSA key generation is slow in debug builds).
    static let account: FCMSimulatorServiceAccount = {
        do { return try FCMSimulatorServiceAccount.generate(projectID: "callpush-worker-test") } catch { fatalError("RSA key generation failed: \(error)") }
    }()

    let simulator: FCMSimulator
    let client: FCMClient
    var sender: FCMPushSender { FCMPushSender(client: client) }

    static func start() async throws -> FCMHarness {
        let logger = Logger(label: "fcm-simulator", factory: { _ in SwiftLogNoOpLogHandler() })
        var configuration = FCMSimulatorConfiguration()
        configuration.serviceAccounts = [account]
        configuration.adminPort = nil
        let simulator = try FCMSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        do {
            let serviceAccount = try FCMServiceAccount(json: Array(try simulator.serviceAccountJSON().utf8))
            let client = try FCMClient.localSimulator(
                port: simulator.port, caCertificatePEM: simulator.caCertificatePEM, apps: ["rider": FCMApp(serviceAccount: serviceAccount)],
                configure: { $0.requestTimeout = TestTiming.scaled(.seconds(2)) }, logger: logger)
            return FCMHarness(simulator: simulator, client: client)
        } catch {
            await simulator.stop()
            throw error
        }
    }

    func stop() async {
        await client.shutdown()
        await simulator.stop()
    }

    /// From now on FCM answers every message to `token` with `error` (and nothing else is faulted).
    func answer(_ token: String, with error: FCMSimulatedError) {
        simulator.setFaults(FCMSimulatorFaults(tokenOutcomes: [token: error]))
    }

    /// Accepted messages for `token`.
    func messages(for token: String) -> [RecordedFCMMessage] {
        simulator.messages().filter { $0.token == token }
    }
}

extension WorkerTestbed {
    /// A testbed with both simulators and a worker sender that routes each device to its platform's.
    static func withBothSimulators(partitions: Int, _ body: (SimulatorHarness, FCMHarness, WorkerTestbed) async throws -> Void) async throws {
        try await withShutdown(try await FCMHarness.start(), shutdown: { await $0.stop() }) { fcm in
            try await withSimulator(partitions: partitions) { apns, bed in try await body(apns, fcm, bed) }
        }
    }

    /// A worker that rings iPhones through `apns` and the app `rider`'s Android phones through `fcm`.
    func startPlatformWorker(_ apns: SimulatorHarness, _ fcm: FCMHarness) throws -> RunningWorker {
        try startWorker("worker-a", sender: PlatformPushSender(apns: apns.sender, fcm: fcm.sender), androidApps: ["rider"])
    }
}

/// Android rings through the shared delivery engine (fakes: no Kafka, no network).
@Suite struct AndroidDeliveryEngine {
    @Test func anAndroidRingIsSentAsAnFCMDataMessageAndItsStatusCarriesFCMDetails() async throws {
        let h = Harness()
        h.sender.script(fcmToken(1), [.fcmSent])
        let ring = makeAndroidRing()
        #expect(try await h.process(.ring(ring)) == .finished(.sent))
        let push = try #require(h.sender.sent.first?.push)
        #expect(push.platform == .android)
        #expect(push.deviceToken == fcmToken(1), "the token verbatim")
        #expect(push.collapseKey == ring.callId)
        #expect(push.expiration == ring.ringDeadline)
        let payload = try VoIPPayload(fcmData: push.data)
        #expect(payload.callId == ring.callId)
        #expect(payload.deviceKey == DeviceKey.make(token: ring.device.token))
        #expect(try AckTokenSigner(secret: testSecret).verify(payload.ackToken, callId: ring.callId, deviceKey: payload.deviceKey),
                "the data carries a valid ack token")
        let status = try #require(h.publisher.statuses.last)
        #expect(status.state == .sent)
        #expect(status.apns == nil)
        #expect(status.fcm?.name == "projects/p/messages/1")
    }

    @Test func unregisteredEndsFailedWithFCMsCodeInTheStatusAndTheDLQ() async throws {
        let h = Harness()
        h.sender.script(fcmToken(2), [.fcmUnregistered])
        let ring = makeAndroidRing(token: fcmToken(2))
        #expect(try await h.process(.ring(ring)) == .finished(.failed))
        let status = try #require(h.publisher.statuses.last)
        #expect(status.error?.code == "UNREGISTERED")
        #expect(status.fcm?.errorCode == "UNREGISTERED")
        #expect(status.fcm?.status == 404)
        #expect(status.apns == nil)
        let dlq = try #require(h.publisher.deadLetters.first)
        #expect(dlq.headers[DeadLetterHeader.error] == "UNREGISTERED")
        #expect(dlq.headers[DeadLetterHeader.reason]?.contains("no longer valid") == true)
    }

    /// The credential circuit is per (app, platform, credential): FCM refusing the app's service
    /// account suspends its Android rings and leaves its iPhone rings alone.
    @Test func anFCMCredentialRefusalSuspendsTheAppsAndroidRingsOnly() async throws {
        let h = Harness()
        h.sender.script(fcmToken(3), [.fcmSenderMismatch])
        #expect(try await h.process(.ring(makeAndroidRing(token: fcmToken(3)))) == .finished(.failed))
        #expect(try await h.process(.ring(makeAndroidRing(token: fcmToken(4)))) == .finished(.failed))
        #expect(h.sender.sent.filter { $0.push.deviceToken == fcmToken(4) }.isEmpty, "suspended: not sent")
        let suspended = try #require(h.publisher.statuses.last)
        #expect(suspended.error?.code == DeliveryProcessor.suspendedCode)
        #expect(suspended.error?.message?.contains("FCM refused the credentials of app rider") == true, "\(suspended.error?.message ?? "")")
        #expect(try await h.process(.ring(makeRing(token: hexToken(0x1f05)))) == .finished(.sent), "the app's iPhones still ring")
        #expect(h.processor.credentials.suspended(now: Date()) == [.fcm(app: "rider")])
    }

    @Test func anAndroidRingForAnAppWithoutFCMCredentialsIsRejectedToTheDLQ() async throws {
        let h = Harness()
        #expect(try await h.process(.ring(makeAndroidRing(app: "taxi"))) == .finished(.rejected))
        #expect(h.sender.sent.isEmpty)
        let status = try #require(h.publisher.statuses.last)
        #expect(status.error?.code == "invalid-value")
        #expect(status.error?.message?.contains("no FCM credentials") == true)
        #expect(h.publisher.deadLetters.count == 1, "kept for replay once the apps file has the service account")
    }

    @Test func fcmOutcomesMapOntoTheEnginesDispositions() {
        func outcome(_ status: Int, _ code: FCMErrorCode?, retryAfter: Duration? = nil) -> FCMOutcome {
            FCMOutcome(status: status, errorCode: code, rpcStatus: nil, errorMessage: nil, tokenViolation: false,
                       messageName: status == 200 ? "projects/p/messages/9" : nil, retryAfter: retryAfter, latency: .zero, attempts: 1)
        }
        let sent = FCMPushSender.attempt(outcome(200, nil))
        #expect(sent.disposition == .sent)
        #expect(sent.reason == nil)
        #expect(sent.fcm == CallStatus.FCMDetails(name: "projects/p/messages/9", status: 200, errorCode: nil))
        #expect(FCMPushSender.attempt(outcome(404, .unregistered)).disposition == .tokenDead)
        #expect(FCMPushSender.attempt(outcome(403, .senderIDMismatch)).disposition == .credentialsInvalid)
        #expect(FCMPushSender.attempt(outcome(503, .unavailable)).disposition == .retry)
        #expect(FCMPushSender.attempt(outcome(500, .internal)).disposition == .retry)
        let quota = FCMPushSender.attempt(outcome(429, .quotaExceeded, retryAfter: .seconds(7)))
        #expect(quota.disposition == .retry)
        #expect(quota.minimumRetryDelay == .seconds(7), "Retry-After is honoured")
        #expect(quota.reason == "QUOTA_EXCEEDED")
        let timeout = FCMPushSender.attempt(FCMOutcome(error: FCMError(.timeout, "t"), latency: .zero, attempts: 1))
        #expect(timeout.disposition == .retry)
        #expect(timeout.fcm?.errorCode == "timeout")
        #expect(timeout.fcm?.status == nil)
    }

    /// The contract's FCM token rule and the FCM client's agree on what a token can be (the
    /// contract's bound is the smaller): a ring the worker takes is never refused by the client as
    /// a bad token.
    @Test func theContractAndTheClientAgreeOnTokens() {
        var candidates = ["", "a", fcmToken(1), "abc/def", "abc def", "a.b:c-d_e", "ü", String(repeating: "A", count: 256), String(repeating: "A", count: 257)]
        for byte in UInt8(0x20)..<0x7F { candidates.append("tok" + String(UnicodeScalar(byte)) + "en") }
        for candidate in candidates where Device.fcmTokenProblem(candidate) == nil {
            #expect(FCMRegistrationToken.isValid(candidate), "\(candidate)")
        }
        for candidate in candidates where candidate.utf8.count <= Device.fcmTokenMaxBytes {
            #expect((Device.fcmTokenProblem(candidate) == nil) == FCMRegistrationToken.isValid(candidate), "\(candidate)")
        }
    }
}

/// Workers on the embedded cluster ringing iPhones through the APNs simulator and Android phones
/// through the FCM simulator, with the real clients.
@Suite(.serialized) struct AndroidWorkerWithSimulators {
    @Test func aCallToAnIPhoneAndAnAndroidPhoneRingsBothOnce() async throws {
        try await WorkerTestbed.withBothSimulators(partitions: 2) { apns, fcm, bed in
            let worker = try bed.startPlatformWorker(apns, fcm)
            let callId = CallID.make()
            let iphone = makeRing(token: hexToken(0xa11), callId: callId)
            let android = makeAndroidRing(token: fcmToken(11), callId: callId)
            try await bed.produce([.ring(iphone), .ring(android)])
            let statuses = try await bed.collectStatuses(until: { $0.terminal(callId).count >= 2 }, seconds: 30)
            #expect(statuses.terminal(callId) == [.sent, .sent])
            #expect(apns.pushes(for: iphone.device.token).count == 1, "the iPhone rang once")
            let messages = fcm.messages(for: android.device.token)
            try #require(messages.count == 1, "the Android phone rang once")
            let message = messages[0]
            #expect(message.android?.priority == "HIGH")
            #expect(message.android?.collapseKey == callId)
            #expect(message.android?.directBootOk == true)
            #expect(!message.hasNotification, "data-only")
            #expect(message.receivedAt < android.ringDeadline)
            let payload = try VoIPPayload(fcmData: message.data)
            #expect(payload.callId == callId)
            #expect(payload.deviceKey == DeviceKey.make(token: android.device.token))
            let androidStatus = try #require(bed.log.value.withLock { $0.lastByDevice[payload.deviceKey] })
            #expect(androidStatus.state == .sent)
            #expect(androidStatus.fcm?.name == message.name, "the status names FCM's message")
            #expect(androidStatus.apns == nil)
            await bed.stop([worker])
        }
    }

    @Test func anAndroidTokenAnsweredUnregisteredEndsFailedInTheDLQAndReplays() async throws {
        try await WorkerTestbed.withBothSimulators(partitions: 2) { apns, fcm, bed in
            let ring = makeAndroidRing(token: fcmToken(12))
            fcm.answer(ring.device.token, with: .unregistered)
            let worker = try bed.startPlatformWorker(apns, fcm)
            try await bed.ringUntilEnded(ring)
            let failed = try #require(bed.log.value.withLock { $0.latest(ring.callId) })
            #expect(failed.state == .failed)
            #expect(failed.error?.code == "UNREGISTERED")
            #expect(failed.fcm?.errorCode == "UNREGISTERED")
            #expect(failed.fcm?.status == 404)
            let dlq = try await bed.readDeadLetters(count: 1, seconds: 20)
            try #require(dlq.count == 1)
            #expect(dlq[0].header(DeadLetterHeader.error)?.stringValue == "UNREGISTERED")

            // Replay (what `callpush replay` does with the DLQ record: the next generation, republished)
            // once the token works again: the phone rings.
            fcm.simulator.setFaults(FCMSimulatorFaults())
            guard case .ring(var replayed) = try CallRequest.decode(dlq[0].value) else { Issue.record("not a ring"); return }
            #expect(replayed == ring, "the DLQ keeps the original event")
            replayed.replay += 1
            replayed.ringDeadline = ContractCoding.truncatedToMilliseconds(Date().addingTimeInterval(TestTiming.scaled(seconds: 30)))
            try await bed.produce([.ring(replayed)])
            _ = try await bed.collectStatuses(until: { $0.states(ring.callId).contains(.sent) }, seconds: 30)
            let messages = fcm.messages(for: ring.device.token)
            try #require(messages.count == 1, "the replay rang once")
            #expect(try VoIPPayload(fcmData: messages[0].data).replay == 1)
            await bed.stop([worker])
        }
    }

    /// FCM refusing the app's service account (SENDER_ID_MISMATCH) suspends the app's Android rings
    /// without contacting FCM again, while its iPhones keep ringing.
    @Test func fcmRefusingTheServiceAccountSuspendsOnlyTheAppsAndroidRings() async throws {
        try await WorkerTestbed.withBothSimulators(partitions: 2) { apns, fcm, bed in
            let refused = makeAndroidRing(token: fcmToken(15))
            fcm.answer(refused.device.token, with: .senderIDMismatch)
            let worker = try bed.startPlatformWorker(apns, fcm)
            try await bed.ringUntilEnded(refused)
            #expect(bed.log.value.withLock { $0.latest(refused.callId)?.error?.code } == "SENDER_ID_MISMATCH")

            let held = makeAndroidRing(token: fcmToken(16))
            let iphone = makeRing(token: hexToken(0xa16))
            try await bed.produce([.ring(held), .ring(iphone)])
            let statuses = try await bed.collectStatuses(until: { !$0.terminal(held.callId).isEmpty && !$0.terminal(iphone.callId).isEmpty },
                                                         seconds: 30)
            #expect(statuses.latest(held.callId)?.error?.code == DeliveryProcessor.suspendedCode)
            #expect(fcm.messages(for: held.device.token).isEmpty, "not sent while the service account is refused")
            #expect(statuses.terminal(iphone.callId) == [.sent], "the app's iPhones still ring")
            #expect(apns.pushes(for: iphone.device.token).count == 1)
            await bed.stop([worker])
        }
    }

    @Test func anFCMUnavailableBurstIsRetriedAndSentBeforeTheDeadline() async throws {
        try await WorkerTestbed.withBothSimulators(partitions: 2) { apns, fcm, bed in
            let worker = try bed.startPlatformWorker(apns, fcm)
            let warmUp = makeAndroidRing(token: fcmToken(13))
            try await bed.ringUntilEnded(warmUp)  // group joined, access token fetched, connection open

            var faults = FCMSimulatorFaults()
            faults.errorRate = FCMErrorInjection(error: .unavailable, probability: 1, startsAt: Date(),
                                                 endsAt: Date().addingTimeInterval(TestTiming.scaled(seconds: 1.5)))
            fcm.simulator.setFaults(faults)
            let ring = makeAndroidRing(token: fcmToken(14), ringsFor: TestTiming.scaled(seconds: 20))
            let statuses = try await bed.ringUntilEnded(ring)
            try statuses.expectRetriedThenSentOnce(ring, arrivals: fcm.messages(for: ring.device.token).map(\.receivedAt))
            await bed.stop([worker])
        }
    }
}
