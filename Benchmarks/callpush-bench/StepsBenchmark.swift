import ArgumentParser
import CallContract
import CallpushCore
import DispatchService
import Foundation
import Kafka
import PushWorker
import Locking

/// The CPU time of each synchronous step a worker takes for one ring, measured alone on one
/// thread over many events: what the delivery costs before any task, continuation, Kafka or APNs
/// exchange. Compared with the end-to-end cost per event (`worker`), it says how much of that is
/// the steps themselves and how much the machinery around them.
struct StepsBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "steps", abstract: "CPU per event of each of the worker's synchronous steps (prints figures).")

    @Option(help: "Events to run through each step.") var events = 200_000
    @Flag(help: .hidden) var viewMemoryOnly = false

    func run() throws {
        let budget = DispatchConfiguration(kafka: KafkaConfiguration(bootstrapServers: ["localhost:9092"], clientID: "bench"), apps: [],
                                           apiKeys: [], ackSecret: Array(repeating: 1, count: 32)).viewBytes
        if viewMemoryOnly {
            let view = Self.viewFilled(budget: budget)
            print("\(view.calls) \(view.resident) \(view.estimated)")
            return
        }
        // In a process of its own, so that no free space left by another measurement hides its growth.
        let viewMemory = try Self.viewFilledInChild()
        // First, while the heap has no free space of earlier steps to hide the growth in.
        let dedupeMemory = Self.dedupeBytesPerDelivery(events)
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
            let micros = (ContinuousClock.now - start).inSeconds * 1e6 / Double(events)
            total += micros
            print(name.padding(toLength: 34, withPad: " ", startingAt: 0) + String(format: "%6.2f µs", micros))
        }
        print("callpush-bench steps: \(events) ring events, one thread")
        var rings: [RingRequest] = []
        rings.reserveCapacity(events)
        try step("decode and validate the ring") {
            for document in documents {
                guard case .ring(let ring) = try CallRequest.decode(document) else { throw ValidationError("not a ring") }
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
        var statuses: [Data] = []
        statuses.reserveCapacity(events)
        try step("status encoding") {
            for (index, ring) in rings.enumerated() {
                statuses.append(try WorkerBenchmark.sentStatus(ring, deviceKey: keys[index], apnsID: apnsIDs[index], at: Date()).encoded())
            }
        }
        print(String(format: "all steps                         %6.2f µs", total))
        // Not worker steps (after the total): what each dispatch instance's status view spends on every status.
        try step("status decoding (dispatch's view)") { for status in statuses { _ = try CallStatus.decode(status) } }
        try step("  the JSONDecoder path alone") { for status in statuses { _ = try ContractCoding.decode(CallStatus.self, from: status) } }
        print("dedupe memory per delivery        " + (dedupeMemory.map { "\($0) bytes" } ?? "n/a"))
        print("status view at its default budget \(viewMemory.calls) one-device calls, \(viewMemory.resident >> 20) MiB resident for \(budget >> 20) MiB counted"
              + " (\(viewMemory.resident / viewMemory.calls) bytes per call, \(viewMemory.estimated / viewMemory.calls) estimated)")
    }

    /// What dispatch's status view holds when filled to `budget` (its default, as each dispatch
    /// instance runs) with one-device calls, each with its `sent` status, as most calls are: the
    /// growth of this process's resident set against the bytes the view counts (its estimate).
    static func viewFilled(budget: Int) -> (calls: Int, resident: Int, estimated: Int) {
        let now = Date()
        let view = StatusView(window: .seconds(3_600), budgetBytes: budget)
        let before = residentBytes()
        var index = 0
        // Until the budget is reached: the view then forgets one call for each new one.
        while view.count == index {
            let ring = WorkerBenchmark.ring(callId: CallID.make(), token: String(repeating: "ab", count: 32), now: now)
            let key = DeviceKey.make(token: ring.device.token)
            view.apply(rings: [ring], deviceKeys: [key], partition: 0)
            _ = view.apply(status: WorkerBenchmark.sentStatus(ring, deviceKey: key, apnsID: UUID().uuidString.lowercased(), at: now),
                           partition: 0, offset: Int64(index))
            index += 1
        }
        return (view.count, residentBytes() - before, view.bytes)
    }

    /// ``viewFilled(budget:)`` in a child process (this program, `steps --view-memory-only`).
    static func viewFilledInChild() throws -> (calls: Int, resident: Int, estimated: Int) {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        child.arguments = ["steps", "--view-memory-only"]
        let output = Pipe()
        child.standardOutput = output
        try child.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        child.waitUntilExit()
        let fields = (String(data: data, encoding: .utf8) ?? "").split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard child.terminationStatus == 0, fields.count == 3, fields[0] > 0 else {
            throw ValidationError("the status view measurement failed (exit \(child.terminationStatus))")
        }
        return (fields[0], fields[1], fields[2])
    }

    /// This process's resident set (`/proc/self/statm`).
    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
              let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The memory a dedupe store holds per remembered delivery (the growth of this process's
    /// resident set while one fills): what a worker draining a backlog keeps for every ring of the
    /// last minutes. Keys are made from fresh strings that nothing else keeps, as in the worker,
    /// where the decoded event is gone once its delivery ends.
    static func dedupeBytesPerDelivery(_ count: Int) -> Int? {
        let token = String(repeating: "ab", count: 32)
        let deviceKey = DeviceKey.make(token: token)
        let deadline = Date().addingTimeInterval(60)
        let before = residentBytes()
        var store = DedupeStore(retention: .seconds(600), capacity: count * 2)
        for index in 0..<count {
            // A fresh copy of the device key per delivery, as each decoded event has its own.
            store.insert(DeliveryKey(callId: CallID.make(), deviceKey: String(deviceKey.utf8.map { Character(Unicode.Scalar($0)) }), replay: index & 1),
                         ringDeadline: deadline)
        }
        let held = residentBytes() - before
        precondition(store.count == count)
        return held > 0 ? held / count : nil
    }
}
