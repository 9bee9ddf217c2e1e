import ArgumentParser
import CallContract
import CallpushCore
import Foundation
import PushWorker

/// The CPU time of each synchronous step a worker takes for one ring, measured alone on one
/// thread over many events: what the delivery costs before any task, continuation, Kafka or APNs
/// exchange. Compared with the end-to-end cost per event (`worker`), it says how much of that is
/// the steps themselves and how much the machinery around them.
struct StepsBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "steps", abstract: "CPU per event of each of the worker's synchronous steps (prints figures).")

    @Option(help: "Events to run through each step.") var events = 200_000

    func run() throws {
        let now = Date()
        let documents = try (0..<events).map { _ in
            let ring = WorkerBenchmark.ring(callId: CallID.make(), token: String(repeating: "ab", count: 32), now: now)
            return Array(try CallRequest.ring(ring).encoded())
        }
        let signer = try AckTokenSigner(secret: Array(repeating: 1, count: 32))
        let dedupe = PartitionDedupe(retention: .seconds(600), capacity: events * 2)
        dedupe.install(dedupe.makeStore(), partition: 0)
        var total = 0.0
        func step(_ name: String, _ body: () throws -> Void) rethrows {
            let start = ContinuousClock.now
            try body()
            let micros = (ContinuousClock.now - start).seconds * 1e6 / Double(events)
            total += micros
            print(name.padding(toLength: 34, withPad: " ", startingAt: 0) + String(format: "%6.2f µs", micros))
        }
        print("callpush-bench steps: \(events) ring events, one thread")
        var rings: [RingRequest] = []
        rings.reserveCapacity(events)
        try step("decode and validate the ring") {
            for document in documents {
                guard case .ring(let ring) = try CallRequest.decode(Data(document)) else { throw ValidationError("not a ring") }
                rings.append(ring)
            }
        }
        var keys: [String] = []
        keys.reserveCapacity(events)
        step("device key (SHA-256 of the token)") { for ring in rings { keys.append(DeviceKey.make(token: ring.device.token)) } }
        step("dedupe insert") {
            for (index, ring) in rings.enumerated() {
                _ = dedupe.store(for: 0).insert(DeliveryKey(callId: ring.callId, deviceKey: keys[index], replay: ring.replay),
                                                ringDeadline: ring.ringDeadline)
            }
        }
        var tokens: [String] = []
        tokens.reserveCapacity(events)
        step("ack token (HMAC)") {
            for (index, ring) in rings.enumerated() { tokens.append(signer.token(callId: ring.callId, deviceKey: keys[index])) }
        }
        try step("VoIP payload encoding") {
            for (index, ring) in rings.enumerated() {
                _ = try VoIPPayload(ring: ring, deviceKey: keys[index], ackToken: tokens[index]).encoded()
            }
        }
        var apnsIDs: [String] = []
        apnsIDs.reserveCapacity(events)
        step("apns-id") {
            for (index, ring) in rings.enumerated() { apnsIDs.append(APNSID.make(callId: ring.callId, deviceKey: keys[index], replay: ring.replay)) }
        }
        try step("status encoding") {
            for (index, ring) in rings.enumerated() {
                _ = try WorkerBenchmark.sentStatus(ring, deviceKey: keys[index], apnsID: apnsIDs[index], at: Date()).encoded()
            }
        }
        print(String(format: "all steps                         %6.2f µs", total))
    }
}
