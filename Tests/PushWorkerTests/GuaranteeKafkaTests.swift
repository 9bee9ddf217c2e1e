import CallContract
import CallpushCore
import CallpushTestSupport
import Foundation
import Kafka
import Logging
import Testing
@testable import PushWorker

/// The ring guarantees with real Kafka (the embedded cluster) under the conditions of the worker
/// review (worker.md): cancels across restarts and under saturation, producer failures.
@Suite(.serialized) struct GuaranteesOnKafka {
    /// M1: a processed cancel outlives the worker that processed it. Restart the workers, replay
    /// the call: it must not ring.
    @Test func aCancelSurvivesARestartOfTheWorkers() async throws {
        try await WorkerTestbed.with(partitions: 1) { bed in
            let sender = ScriptedSender()
            let first = try bed.startWorker("worker-a", sender: sender)
            let ring = makeRing(token: hexToken(0xc0), ringsFor: TestTiming.scaled(seconds: 60))
            let marker = makeRing(token: hexToken(0xc1))
            try await bed.produce([.cancel(CancelRequest(callId: ring.callId, requestedAt: Date())), .ring(marker)])
            _ = try await bed.collectStatuses(until: { $0.terminal(marker.callId) == [.sent] }, seconds: 30)
            await bed.stop([first])  // commits: the cancel will not be read again

            let second = try bed.startWorker("worker-b", sender: sender)
            var replayed = ring
            replayed.replay = 1
            try await bed.produce([.ring(replayed), .ring(makeRing(token: hexToken(0xc2)))])
            let statuses = try await bed.collectStatuses(until: { $0.terminalCalls >= 3 }, seconds: 60)
            #expect(statuses.terminal(ring.callId) == [.cancelled])
            #expect(!sender.sent.contains { $0.push.deviceToken == ring.device.token }, "a cancelled call never rings")
            await bed.stop([second])
        }
    }

    /// M2: a cancel does not wait for an in-flight slot: with every slot held by a delivery in
    /// retry back-off, the cancel still stops it.
    @Test func aCancelStopsARetryingDeliveryWhenEveryInFlightSlotIsTaken() async throws {
        try await WorkerTestbed.with(partitions: 1) { bed in
            let sender = ScriptedSender()
            let ring = makeRing(token: hexToken(0xd0), ringsFor: TestTiming.scaled(seconds: 60))
            sender.script(ring.device.token, Array(repeating: .unavailable, count: 60))
            let worker = try bed.startWorker("worker-a", sender: sender, maxInFlight: 1)
            try await bed.produce([.ring(ring)])
            while sender.sent.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
            try await bed.produce([.cancel(CancelRequest(callId: ring.callId, requestedAt: Date()))])
            let statuses = try await bed.collectStatuses(until: { !$0.terminal(ring.callId).isEmpty }, seconds: 60)
            #expect(statuses.terminal(ring.callId) == [.cancelled])
            #expect(sender.sent.filter { $0.push.deviceToken == ring.device.token }.count < 60, "stopped before its retries ran out")
            await bed.stop([worker])
        }
    }

    /// H2: a fatal producer error (the idempotent producer refused at InitProducerId) does not
    /// wedge the worker: its producer is replaced and the outcome is written.
    @Test func aFatalProducerErrorIsRecoveredFromAndTheOutcomeWritten() async throws {
        try await WorkerTestbed.with(partitions: 1) { bed in
            let ring = makeRing(token: hexToken(0xe0), ringsFor: TestTiming.scaled(seconds: 60))
            try await bed.produce([.ring(ring)])  // the test's own producer has its producer id: the fault is the worker's
            try bed.cluster.pushRequestErrors(apiKey: .initProducerID, errors: ["CLUSTER_AUTHORIZATION_FAILED"])
            let sender = ScriptedSender()
            let worker = try bed.startWorker("worker-a", sender: sender)
            let statuses = try await bed.collectStatuses(until: { $0.terminal(ring.callId) == [.sent] }, seconds: 60)
            #expect(statuses.terminal(ring.callId) == [.sent])
            await bed.stop([worker])
        }
    }

    /// H2: a request record too large for the worker's producer is dead-lettered in a form that
    /// fits (truncated, with its origin in the headers) instead of being retried forever, and the
    /// partition moves past it.
    @Test func aRecordTooLargeToDeadLetterIsDeadLetteredTruncatedAndThePartitionMovesOn() async throws {
        try await WorkerTestbed.with(partitions: 1) { bed in
            var big = KafkaProducerConfiguration(kafka: WorkerTestbed.kafka(bed.cluster, "big-producer"))
            big.kafka.properties["message.max.bytes"] = "2000000"
            let producer = try KafkaProducer(configuration: big, logger: bed.logger)
            let poison = KafkaProducerRecord(topic: bed.topics.requests, key: Array("poison".utf8),
                                             value: Array(repeating: UInt8(ascii: "x"), count: 1_010_000))
            _ = try await producer.send(poison)
            await producer.shutdown()
            let worker = try bed.startWorker("worker-a", sender: ScriptedSender())
            let rings = (0..<5).map { makeRing(token: hexToken(0xf0 + $0)) }
            try await bed.produce(rings.map { .ring($0) })
            _ = try await bed.collectStatuses(until: { log in rings.allSatisfy { log.terminal($0.callId) == [.sent] } }, seconds: 60)
            let dlq = try await bed.readDeadLetters(count: 1, seconds: 60)
            #expect(dlq.count == 1)
            #expect(dlq.first?.header(DeadLetterHeader.originalOffset)?.stringValue == "0")
            #expect((dlq.first?.value.count ?? .max) < 1_000_000)
            await bed.stop([worker])
        }
    }

    /// M5: the lag gauge keeps counting while the worker is too slow and fetching is paused (the
    /// consumer then learns no high watermark from fetches).
    @Test func consumerLagKeepsGrowingWhileFetchingIsPaused() async throws {
        try await WorkerTestbed.with(partitions: 1) { bed in
            let sender = ScriptedSender(latency: .seconds(120))
            let worker = try bed.startWorker("worker-slow", sender: sender, maxInFlight: 10)
            try await bed.produce((0..<400).map { _ in .ring(makeRing(ringsFor: TestTiming.scaled(seconds: 300))) })
            let paused = ContinuousClock.now + .seconds(30)
            while worker.service.consumer.backpressurePauseCount == 0, ContinuousClock.now < paused {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(worker.service.consumer.backpressurePauseCount > 0, "the slow worker paused fetching")
            try await bed.produce((0..<3_000).map { _ in .ring(makeRing(ringsFor: TestTiming.scaled(seconds: 300))) })
            func lag() -> Double? {
                worker.service.metrics.exposition().split(separator: "\n")
                    .first { $0.hasPrefix(#"callpush_worker_consumer_lag_messages{partition="0"}"#) }
                    .flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }
            }
            let deadline = ContinuousClock.now + .seconds(30)  // gauges are refreshed every 5 s
            while (lag() ?? 0) < 3_000, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(250)) }
            #expect((lag() ?? 0) >= 3_000, "lag \(lag() ?? -1)")
            await bed.stop([worker])
        }
    }
}
