import CallContract
import CallpushTestSupport
import Foundation
import Kafka
import Locking
import Testing
@testable import PushWorker

/// Statuses written at the same moment share one producer send, and each writer still gets its
/// own record's result (`StatusWriteBatcher`).
@Suite struct StatusWriteBatching {
    /// Holds the batcher's flushes until the test runs them, so what gathers is deterministic.
    final class HeldFlushes: Sendable {
        private let flushes = Locked<[@Sendable () async -> Void]>([])
        func hold(_ flush: @escaping @Sendable () async -> Void) { flushes.withLock { $0.append(flush) } }
        var count: Int { flushes.withLock { $0.count } }
        func runAll() async {
            for flush in flushes.withLock({ state in defer { state = [] }; return state }) { await flush() }
        }
    }

    /// What the fake producer was given, batch by batch.
    final class Sends: Sendable {
        let batches = Locked<[[String]]>([])
        func record(_ records: [KafkaProducerRecord]) { batches.withLock { $0.append(records.map { String(decoding: $0.key ?? [], as: UTF8.self) }) } }
    }

    static func record(_ callId: String) -> KafkaProducerRecord {
        KafkaProducerRecord(topic: "status", partition: 0, key: callId, value: "{}")
    }

    static func waitUntil(_ condition: () -> Bool) async {
        for _ in 0..<2_000 where !condition() { try? await Task.sleep(for: .milliseconds(5)) }
    }

    @Test func concurrentStatusesShareOneSendAndEachWriterGetsItsOwnResult() async throws {
        let held = HeldFlushes()
        let sends = Sends()
        let batcher = StatusWriteBatcher(send: { records throws(KafkaError) in
            sends.record(records)
            // The broker refuses the record of call-3 only.
            return records.map { String(decoding: $0.key ?? [], as: UTF8.self) == "call-3" ? .failure(KafkaError(code: "MSG_SIZE_TOO_LARGE", message: "too large")) : .success(()) }
        }, schedule: { held.hold($0) })
        let results = Locked<[String: Bool]>([:])
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<10 {
                group.addTask {
                    let ok: Bool
                    do { try await batcher.write(Self.record("call-\(index)")); ok = true } catch { ok = false }
                    results.withLock { $0["call-\(index)"] = ok }
                }
            }
            await Self.waitUntil { batcher.gathered == 10 }
            #expect(held.count == 1, "one flush for everything gathered")
            await held.runAll()
        }
        let batches = sends.batches.withLock { $0 }
        #expect(batches.count == 1)
        #expect(Set(batches.first ?? []) == Set((0..<10).map { "call-\($0)" }))
        let byCall = results.withLock { $0 }
        #expect(byCall.count == 10)
        #expect(byCall["call-3"] == false, "the refused record fails its own writer")
        #expect(byCall.filter { $0.value }.count == 9, "and no other")
    }

    @Test func aSendThatFailsFailsEveryWriterOfItsBatchAndTheNextBatchStartsAfresh() async throws {
        let held = HeldFlushes()
        let calls = Locked(0)
        let batcher = StatusWriteBatcher(send: { records throws(KafkaError) in
            let call = calls.withLock { $0 += 1; return $0 }
            if call == 1 { throw KafkaError(code: .shutdown, message: "producer is shut down") }
            return records.map { _ in .success(()) }
        }, schedule: { held.hold($0) })
        let failures = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<3 {
                group.addTask {
                    do { try await batcher.write(Self.record("a-\(index)")) } catch { failures.withLock { $0 += 1 } }
                }
            }
            await Self.waitUntil { batcher.gathered == 3 }
            await held.runAll()
        }
        #expect(failures.withLock { $0 } == 3)
        // A later status starts a new batch of its own.
        async let later: Void = batcher.write(Self.record("b"))
        await Self.waitUntil { held.count == 1 }
        await held.runAll()
        try await later
        #expect(calls.withLock { $0 } == 2)
    }

    @Test func aMissingResultFailsItsWriterInsteadOfLeavingItWaiting() async {
        let batcher = StatusWriteBatcher(send: { records throws(KafkaError) in
            Array(records.map { _ in Result<Void, KafkaError>.success(()) }.dropLast())
        })
        await #expect(throws: KafkaError.self) { try await batcher.write(Self.record("only")) }
    }
}

/// The batched status writes on the embedded cluster: a status the producer refuses fails only its
/// own delivery's write, the statuses written with it are stored.
@Suite(.serialized) struct StatusWriteBatchingOnKafka {
    @Test func aRefusedStatusInABatchFailsOnlyItsOwnWriteAndTheOthersAreStored() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: WorkerTestbed.quietLogger)
        try cluster.createTopic("status-batch", partitions: 1)
        var kafka = WorkerTestbed.kafka(cluster, "batch")
        kafka.properties["message.max.bytes"] = "10000"
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(kafka: kafka), logger: WorkerTestbed.quietLogger)
        let publisher = KafkaOutcomePublisher(producer: producer, statusTopic: "status-batch", deadLetterTopic: "unused")
        func status(_ callId: String, message: String? = nil) -> CallStatus {
            CallStatus(callId: callId, deviceId: nil, deviceKey: "k-\(callId)", app: "rider", state: .sent, attempt: 1,
                       replay: 0, at: Date(), error: message.map { .init(code: "x", message: $0) }, worker: "w1")
        }
        // Written at once, so they share sends; call-10's status is larger than the producer takes.
        let outcomes = await withTaskGroup(of: (String, OutcomeWriteFailure?).self) { group in
            for index in 0..<20 {
                let callId = "call-\(index)"
                let item = index == 10 ? status(callId, message: String(repeating: "a", count: 20_000)) : status(callId)
                group.addTask {
                    do {
                        try await publisher.publish(status: item, partition: 0, within: nil)
                        return (callId, nil)
                    } catch {
                        return (callId, publisher.classify(error))
                    }
                }
            }
            var outcomes: [String: OutcomeWriteFailure?] = [:]
            for await (callId, failure) in group { outcomes[callId] = failure }
            return outcomes
        }
        #expect(outcomes.count == 20)
        #expect(outcomes["call-10"] == .some(.permanent(code: "MSG_SIZE_TOO_LARGE")), "the refused status fails its own write for good")
        #expect(outcomes.filter { $0.key != "call-10" }.allSatisfy { $0.value == nil }, "and no other write")
        await producer.shutdown()
        let handled = await WorkerTestbed.handledDeliveries(kafka: kafka, statusTopic: "status-batch")
        #expect(handled == Set((0..<20).filter { $0 != 10 }.map { DeliveryKey(callId: "call-\($0)", deviceKey: "k-call-\($0)", replay: 0) }))
        await cluster.shutdown()
    }
}
