import ArgumentParser
import CallContract
import CallpushCore
import Foundation
import Kafka
import Logging
import PushWorker
import Locking

/// The CPU of `DeliveryProcessor.process` per ring event — decode, dedupe, payload, the push and
/// the status write — with an APNs sender that accepts every push at once and a publisher that
/// keeps nothing: the worker's per-event engine without Kafka, APNs or the consume loop. Small and
/// deterministic enough to compare builds by instruction counts (valgrind --tool=callgrind), e.g.
/// before and after a change to the delivery path.
struct DeliveryBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delivery", abstract: "CPU per ring event of the worker's delivery engine, without I/O (prints figures).")

    @Option(help: "Ring events to process.") var events = 50_000
    @Flag(name: .customLong("with-traceparent"),
          help: "Each event carries a caller's `traceparent` header, which the worker passes on to the status record (tracing off).")
    var withTraceparent = false

    struct Accepting: VoIPPushSending {
        func send(_ push: VoIPPush) async -> PushAttempt { PushAttempt(disposition: .sent, status: 200, apnsID: push.apnsID) }
    }

    struct Discarding: OutcomePublishing {
        func publish(status: CallStatus, partition: Int32, within bound: Duration?) async throws {}
        func deadLetter(key: [UInt8]?, value: [UInt8], headers: [(String, String)], within bound: Duration?) async throws {}
    }

    func run() async throws {
        let now = Date()
        let headers = withTraceparent ? [KafkaHeader(key: "traceparent", string: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")] : []
        let events = try (0..<self.events).map { index in
            let ring = WorkerBenchmark.ring(callId: CallID.make(), token: String(repeating: "ab", count: 32), now: now)
            return InboundEvent(partition: 0, offset: Int64(index), key: Array(ring.callId.utf8), value: Array(try CallRequest.ring(ring).encoded()),
                                headers: headers)
        }
        let dedupe = PartitionDedupe(retention: .seconds(600), capacity: events.count * 2)
        dedupe.install(dedupe.makeStore(), partition: 0)
        let processor = DeliveryProcessor(
            settings: .init(workerID: "bench-0", apps: ["bench"]), sender: Accepting(), publisher: Discarding(), cancels: CancelSignals(),
            dedupe: dedupe, ackTokens: try AckTokenSigner(secret: Array(repeating: 1, count: 32)),
            logger: Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() }))
        print("callpush-bench delivery: \(events.count) ring events, one task" + (withTraceparent ? ", each with a traceparent header" : ""))
        let start = ContinuousClock.now
        var sent = 0
        for event in events where await processor.process(event) == .finished(.sent) { sent += 1 }
        let micros = (ContinuousClock.now - start).inSeconds * 1e6 / Double(events.count)
        print(String(format: "process (decode … status write)    %6.2f µs per event (%d sent)", micros, sent))
    }
}
