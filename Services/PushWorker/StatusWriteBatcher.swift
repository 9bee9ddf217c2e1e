import Kafka
import Locking

/// Gathers the status records that deliveries write at the same moment into one producer send.
///
/// Each delivery still waits for its own record's acknowledgement and gets its own result (a record
/// refused in a batch fails only its writer). What is shared is the send: one delivery-report
/// batch, and one wake-up from the producer's poll thread, per batch instead of per status. The
/// first writer that finds no batch gathering starts one task, which yields twice and then takes
/// what has gathered (the writers that were ready to run before it): nothing waits on a timer, and
/// a lone status goes out after two turns of the executor. A batch holds at most one record per delivery in flight, so it is
/// bounded by `maxInFlight`; batches overlap in flight.
final class StatusWriteBatcher: Sendable {
    /// Sends records and returns one result per record, in order.
    typealias Send = @Sendable ([KafkaProducerRecord]) async throws(KafkaError) -> [Result<Void, KafkaError>]
    typealias Waiter = CheckedContinuation<Result<Void, KafkaError>, Never>

    private struct Gathering {
        var records: [KafkaProducerRecord] = []
        var waiters: [Waiter] = []
        var started = false
    }

    private let gathering = Locked(Gathering())
    private let send: Send
    /// Runs a batch's flush (a new task; tests run it when they choose).
    private let schedule: @Sendable (@escaping @Sendable () async -> Void) -> Void

    init(send: @escaping Send,
         schedule: @escaping @Sendable (@escaping @Sendable () async -> Void) -> Void = { flush in Task { await flush() } }) {
        self.send = send
        self.schedule = schedule
    }

    /// Records gathered and not yet taken by a flush.
    var gathered: Int { gathering.withLock { $0.records.count } }

    /// Writes `record` with the records gathered with it; returns once it was acknowledged.
    ///
    /// - Throws: the ``KafkaError`` its delivery failed with, or the one that failed the whole send.
    func write(_ record: KafkaProducerRecord) async throws(KafkaError) {
        let result = await withCheckedContinuation { (waiter: Waiter) in
            let first = gathering.withLock { state -> Bool in
                state.records.append(record)
                state.waiters.append(waiter)
                guard !state.started else { return false }
                state.started = true
                return true
            }
            if first { schedule { await self.flush() } }
        }
        try result.get()
    }

    /// Sends what has gathered; the next writer starts the next batch.
    private func flush() async {
        // The deliveries whose pushes were answered in the same event-loop tick are queued behind
        // this task: yielding lets them add their statuses to this send (a second yield gathered
        // more still, for less CPU per ring in `callpush-bench drain`; a lone status waits two
        // turns of the executor, not a timer).
        await Task.yield()
        await Task.yield()
        let (records, waiters) = gathering.withLock { state in
            defer { state = Gathering() }
            return (state.records, state.waiters)
        }
        do {
            let results = try await send(records)
            for (index, waiter) in waiters.enumerated() {
                // One result per record; a missing one fails its writer rather than leave it waiting.
                waiter.resume(returning: index < results.count ? results[index] : .failure(Self.noResult))
            }
        } catch {
            for waiter in waiters { waiter.resume(returning: .failure(error)) }
        }
    }

    static let noResult = KafkaError(code: "no_result", message: "the producer gave no result for the status record", isRetriable: true)
}
