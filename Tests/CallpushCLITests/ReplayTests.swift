import CallContract
import Foundation
import Kafka
import Testing
@testable import CallpushCLI

/// `callpush replay` against the embedded cluster: the parsed command's runner, in-process.
@Suite(.serialized) struct Replay {
    func replay(_ bed: CLITestbed, _ extra: [String], output: CapturedOutput = CapturedOutput()) async throws -> ReplayRunner.Summary {
        let command = try parse(ReplayCommand.self, ["replay"] + bed.flags + extra)
        return try await command.runner(environment: [:], output: output.output).run()
    }

    func replayed(_ bed: CLITestbed) async throws -> [RingRequest] {
        try await bed.readAll(bed.topics.requests, partitions: 2).map { message in
            guard case .ring(let ring) = try CallRequest.decode(Data(message.value)) else { throw CLIError("test", "not a ring") }
            #expect(message.keyString == ring.callId, "keyed by callId")
            return ring
        }
    }

    @Test func publishesOnlyFilteredNonExpiredRecordsWithTheNextGenerationAndASecondRunPublishesNothing() async throws {
        let bed = try CLITestbed.start()
        let riderGone = CLITestbed.ring(app: "rider")
        let riderBusy = CLITestbed.ring(app: "rider", replay: 2)
        let driver = CLITestbed.ring(app: "driver")
        let expired = CLITestbed.ring(app: "rider", deadline: -10, requestedAgo: 40)
        let garbage = CallID.make()
        try await bed.produce([
            try bed.deadLetter(riderGone, error: "Unregistered", partition: 0),
            try bed.deadLetter(driver, error: "Unregistered", partition: 1),
            try bed.deadLetter(expired, error: "ServiceUnavailable", partition: 0),
            bed.deadLetter(Array(#"{"type":"ring","callId":"#.utf8), callId: garbage, error: "malformed-json", partition: 1),
            try bed.deadLetter(riderBusy, error: "ServiceUnavailable", partition: 1),
        ])

        let output = CapturedOutput()
        let first = try await replay(bed, ["--app", "rider"], output: output)
        #expect(first.counts.total == 5 && first.counts.examined == 5)
        #expect(first.counts.replayed == 2)
        #expect(first.counts.expired == 1, "past its ring deadline: skipped and counted")
        #expect(first.counts.rejected == 1, "undecodable: never replayed")
        #expect(first.counts.filteredOut == 1)
        #expect(output.error.last?.contains("5/5 examined") == true, "progress line: \(output.error)")

        let published = try await replayed(bed)
        #expect(Set(published.map(\.callId)) == [riderGone.callId, riderBusy.callId])
        for ring in published {
            var original = ring.callId == riderGone.callId ? riderGone : riderBusy
            original.replay += 1
            #expect(ring == original, "only the replay generation changes")
        }

        let second = try await replay(bed, ["--app", "rider"])
        #expect(second.counts.total == 0 && second.counts.replayed == 0)
        #expect(try await replayed(bed).count == 2, "a second run publishes nothing new")
        await bed.stop()
    }

    /// An Android ring FCM answered UNREGISTERED comes back as the next generation, platform and
    /// token (case kept) unchanged.
    @Test func anAndroidRingIsReplayedWithItsPlatformAndToken() async throws {
        let bed = try CLITestbed.start()
        var android = CLITestbed.ring()
        android.device = Device(fcmToken: "fA3-x_Q:APA91bZ" + String(repeating: "Kp9_Lm-", count: 20), id: "pixel-1")
        try await bed.produce([try bed.deadLetter(android, error: "UNREGISTERED")])
        let summary = try await replay(bed, ["--error-code", "UNREGISTERED"])
        #expect(summary.counts.replayed == 1)
        let published = try await replayed(bed)
        try #require(published.count == 1)
        var expected = android
        expected.replay = 1
        #expect(published[0] == expected)
        #expect(published[0].device.platform == .android && published[0].device.environment == nil)
        await bed.stop()
    }

    @Test func dryRunListsWithoutPublishingOrMovingThePosition() async throws {
        let bed = try CLITestbed.start()
        let ring = CLITestbed.ring()
        try await bed.produce([try bed.deadLetter(ring, error: "Unregistered")])

        let output = CapturedOutput()
        let dry = try await replay(bed, ["--dry-run"], output: output)
        #expect(dry.counts.replayed == 1)
        #expect(output.out.contains { $0.hasPrefix("would replay") && $0.contains(ring.callId) && !$0.contains(ring.device.token) },
                "lists the record without the token: \(output.out)")
        #expect(try await bed.readAll(bed.topics.requests, partitions: 2).isEmpty, "dry run publishes nothing")

        let real = try await replay(bed, [])
        #expect(real.counts.replayed == 1, "the dry run left the position where it was")
        #expect(try await replayed(bed).map(\.callId) == [ring.callId])
        await bed.stop()
    }

    @Test func newDeadlineReArmsExpiredRecords() async throws {
        let bed = try CLITestbed.start()
        let expired = CLITestbed.ring(deadline: -60, requestedAgo: 90)
        try await bed.produce([try bed.deadLetter(expired, error: "ServiceUnavailable")])
        let before = Date()
        let summary = try await replay(bed, ["--new-deadline", "30s"])
        #expect(summary.counts.replayed == 1 && summary.counts.rearmed == 1 && summary.counts.expired == 0)
        let ring = try #require(try await replayed(bed).first)
        #expect(ring.replay == 1)
        #expect(abs(ring.ringDeadline.timeIntervalSince(before) - 30) < 10, "deadline = now + 30s")
        #expect(ring.requestedAt >= ContractCoding.truncatedToMilliseconds(before), "requestedAt = now")
        #expect(ring.caller == expired.caller && ring.device == expired.device && ring.attributes == expired.attributes)
        await bed.stop()
    }

    @Test func anInterruptedRunContinuesWhereItStoppedWithoutPublishingTwice() async throws {
        let bed = try CLITestbed.start()
        let rings = (0..<5).map { _ in CLITestbed.ring() }
        try await bed.produce(try rings.enumerated().map { try bed.deadLetter($1, error: "Unregistered", partition: Int32($0 % 2)) })

        let first = try await replay(bed, ["--max", "2"])
        #expect(first.counts.replayed == 2)
        let rest = try await replay(bed, [])
        #expect(rest.counts.replayed == 3)
        let published = try await replayed(bed).map(\.callId)
        #expect(published.count == 5 && Set(published) == Set(rings.map(\.callId)), "each record exactly once")

        let again = try await replay(bed, ["--from-beginning", "--dry-run"])
        #expect(again.counts.replayed == 5, "--from-beginning ignores the committed position")
        let otherGroup = try await replay(bed, ["--group", "second-look", "--dry-run"])
        #expect(otherGroup.counts.total == 5, "another group starts from the beginning")
        await bed.stop()
    }

    @Test func ctrlCStopsAfterTheRecordInProgressAndTheNextRunContinues() async throws {
        let bed = try CLITestbed.start()
        let rings = (0..<4).map { _ in CLITestbed.ring() }
        try await bed.produce(try rings.map { try bed.deadLetter($0, error: "Unregistered", partition: 0) })
        // The stop is requested while the first record is being published (as SIGINT would).
        let interruption = Interruption()
        let output = CommandOutput(out: { line in if line.hasPrefix("replayed") { interruption.request() } }, error: { _ in })
        let command = try parse(ReplayCommand.self, ["replay"] + bed.flags)
        let first = try await command.runner(environment: [:], output: output, interruption: interruption).run()
        #expect(first.interrupted && first.counts.replayed == 1)
        let rest = try await replay(bed, [])
        #expect(rest.counts.replayed == 3 && !rest.interrupted)
        let published = try await replayed(bed).map(\.callId)
        #expect(published.count == 4 && Set(published) == Set(rings.map(\.callId)), "none twice, none lost")
        await bed.stop()
    }

    @Test func filtersByCallIdErrorCodeAndTime() async throws {
        let bed = try CLITestbed.start()
        let old = CLITestbed.ring()
        let recent = CLITestbed.ring()
        let other = CLITestbed.ring()
        try await bed.produce([
            try bed.deadLetter(old, error: "Unregistered", failedAt: Date().addingTimeInterval(-3 * 3600)),
            try bed.deadLetter(recent, error: "Unregistered"),
            try bed.deadLetter(other, error: "BadDeviceToken"),
        ])
        #expect(try await replay(bed, ["--dry-run", "--call-id", recent.callId.uppercased()]).counts.replayed == 1)
        #expect(try await replay(bed, ["--dry-run", "--error-code", "Unregistered"]).counts.replayed == 2)
        #expect(try await replay(bed, ["--dry-run", "--error-code", "Unregistered", "--since", "2h"]).counts.replayed == 1)
        #expect(try await replay(bed, ["--dry-run", "--until", "1h"]).counts.replayed == 1)
        await bed.stop()
    }

    @Test func aMissingDeadLetterTopicIsAClearError() async throws {
        let bed = try CLITestbed.start()
        let error = await #expect(throws: CLIError.self) {
            _ = try await replay(bed, ["--topic-dlq", "no-such-topic"])
        }
        #expect(error?.message.contains("topic no-such-topic does not exist") == true)
        await bed.stop()
    }
}

/// The per-record decision, without Kafka.
@Suite struct ReplayDecisionRules {
    func message(_ value: [UInt8], headers: [KafkaHeader] = [], key: String? = nil) -> KafkaConsumerMessage {
        KafkaConsumerMessage(topic: "dlq", partition: 0, offset: 0, key: key.map { Array($0.utf8) }, value: value, headers: headers)
    }

    @Test func aCancelIsNotRungAndTheReplayLimitIsKept() throws {
        let cancel = CallRequest.cancel(CancelRequest(callId: CallID.make(), requestedAt: Date()))
        #expect(ReplayDecision.decide(message(Array(try cancel.encoded())), filter: .init(), newDeadline: nil, now: Date()) == .notRing)
        let top = CLITestbed.ring(replay: RingRequest.Limits.replay.upperBound)
        #expect(ReplayDecision.decide(message(Array(try CallRequest.ring(top).encoded())), filter: .init(), newDeadline: nil, now: Date())
                == .replayLimit)
    }

    @Test func theFailureTimeComesFromTheHeaderElseTheRecordTimestamp() throws {
        let ring = CLITestbed.ring()
        let bytes = Array(try CallRequest.ring(ring).encoded())
        let failedAt = ContractCoding.truncatedToMilliseconds(Date().addingTimeInterval(-3600))
        var record = message(bytes, headers: [KafkaHeader(key: DeadLetterHeader.failedAt, string: ContractCoding.format(failedAt))])
        record.timestampMilliseconds = Int64(Date().timeIntervalSince1970 * 1000)
        let filter = ReplayFilter(since: failedAt.addingTimeInterval(1))
        #expect(ReplayDecision.decide(record, filter: filter, newDeadline: nil, now: Date()) == .filteredOut)
        record.headers = []
        if case .replay = ReplayDecision.decide(record, filter: filter, newDeadline: nil, now: Date()) {} else {
            Issue.record("without the header the record timestamp counts")
        }
    }
}
