import CallContract
import Foundation
import Kafka
import Testing
@testable import CallpushCLI

/// `callpush status` against the embedded cluster.
@Suite(.serialized) struct StatusHistory {
    func status(_ callId: String, _ state: CallStatus.State, attempt: Int, at: Date, apns: CallStatus.APNSDetails? = nil,
                error: CallStatus.ErrorInfo? = nil) -> CallStatus {
        CallStatus(callId: callId, deviceId: "phone-1", deviceKey: "k1b2c3d4e5f6a7b8", app: "rider", state: state,
                   attempt: attempt, replay: 0, at: ContractCoding.truncatedToMilliseconds(at), apns: apns, error: error, worker: "w-1")
    }

    func record(_ bed: CLITestbed, _ status: CallStatus, partition: Int32 = 1) throws -> KafkaProducerRecord {
        KafkaProducerRecord(topic: bed.topics.status, partition: partition, key: Array(status.callId.utf8), value: Array(try status.encoded()))
    }

    @Test func printsTheCallsHistoryAsATableAndAsJSONLines() async throws {
        let bed = try CLITestbed.start()
        let callId = CallID.make()
        let now = Date()
        let history = [
            status(callId, .retrying, attempt: 1, at: now.addingTimeInterval(-2), apns: .init(status: 503, reason: "ServiceUnavailable")),
            status(callId, .sent, attempt: 2, at: now.addingTimeInterval(-1), apns: .init(id: "a-1", status: 200)),
        ]
        let noise = status(CallID.make(), .failed, attempt: 1, at: now, error: .init(code: "Unregistered"))
        try await bed.produce([try record(bed, history[0]), try record(bed, noise, partition: 0), try record(bed, history[1])])

        let table = CapturedOutput()
        let count = try await parse(StatusCommand.self, ["status", callId] + bed.flags).reader(environment: [:], output: table.output).run()
        #expect(count == 2)
        #expect(table.out.count == 3, "header and two rows: \(table.out)")
        #expect(table.out[0].hasPrefix("TIME") && table.out[0].contains("STATE") && table.out[0].contains("APNS"))
        #expect(table.out[1].contains("retrying") && table.out[1].contains("503 ServiceUnavailable") && table.out[1].contains("phone-1"))
        #expect(table.out[2].contains("sent") && table.out[2].contains(ContractCoding.format(history[1].at)))

        let json = CapturedOutput()
        _ = try await parse(StatusCommand.self, ["status", callId, "--json"] + bed.flags).reader(environment: [:], output: json.output).run()
        let decoded = try json.out.map { try CallStatus.decode(Data($0.utf8)) }
        #expect(decoded == history, "JSON lines are the contract's CallStatus documents")
        await bed.stop()
    }

    @Test func followReadsUntilEveryDeliveryIsTerminal() async throws {
        let bed = try CLITestbed.start()
        let callId = CallID.make()
        try await bed.produce([try record(bed, status(callId, .retrying, attempt: 1, at: Date()))])
        let output = CapturedOutput()
        var reader = try parse(StatusCommand.self, ["status", callId, "--follow", "--json"] + bed.flags).reader(environment: [:], output: output.output)
        reader.settle = .milliseconds(300)
        let following = Task { [reader] in try await reader.run() }
        let history = ContinuousClock.now + .seconds(30)
        while output.out.isEmpty && ContinuousClock.now < history { try await Task.sleep(for: .milliseconds(50)) }
        try await Task.sleep(for: .milliseconds(500))
        #expect(output.out.count == 1, "still following after the history")
        try await bed.produce([try record(bed, status(callId, .sent, attempt: 2, at: Date()))])
        let timer = Task {
            try await Task.sleep(for: .seconds(20))
            following.cancel()
        }
        let count = try await following.value
        timer.cancel()
        #expect(count == 2)
        #expect(try output.out.map { try CallStatus.decode(Data($0.utf8)).state } == [.retrying, .sent])
        await bed.stop()
    }

    @Test func anUnknownCallPrintsNothingAndCountsZero() async throws {
        let bed = try CLITestbed.start()
        try await bed.produce([try record(bed, status(CallID.make(), .sent, attempt: 1, at: Date()))])
        let output = CapturedOutput()
        let count = try await parse(StatusCommand.self, ["status", CallID.make(), "--window", "10m"] + bed.flags)
            .reader(environment: [:], output: output.output).run()
        #expect(count == 0, "the command exits 3 on this")
        #expect(output.out.isEmpty, "not even a table header")
        await bed.stop()
    }

    @Test func statusesOlderThanTheWindowAreLeftOut() async throws {
        let bed = try CLITestbed.start()
        let callId = CallID.make()
        try await bed.produce([try record(bed, status(callId, .sent, attempt: 1, at: Date().addingTimeInterval(-7200)))])
        let output = CapturedOutput()
        let count = try await parse(StatusCommand.self, ["status", callId, "--window", "1h"] + bed.flags)
            .reader(environment: [:], output: output.output).run()
        #expect(count == 0)
        await bed.stop()
    }
}
