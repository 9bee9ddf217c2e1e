/// The messages of a ``KafkaConsumer``, as an `AsyncSequence`.
///
/// The iterator takes whole buffered batches at once (one lock per batch) and re-checks
/// them only when the assignment changed, so messages of revoked partitions are never
/// handed out. An iterator dropped early (e.g. after `break`) gives the messages it still
/// held back to the consumer, so the next iterator continues where it stopped.
/// Ends when the consumer shuts down; throws a fatal ``KafkaError``.
public struct KafkaConsumerMessages: AsyncSequence, Sendable {
    public typealias Element = KafkaConsumerMessage

    let consumer: KafkaConsumer

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(consumer: consumer)
    }

    /// Iterates the consumer's messages.
    public struct AsyncIterator: AsyncIteratorProtocol {
        private let held: HeldMessages

        init(consumer: KafkaConsumer) {
            self.held = HeldMessages(consumer: consumer)
        }

        /// The next message, or `nil` once the consumer shut down.
        public mutating func next() async throws -> KafkaConsumerMessage? {
            // Fast path without a nested async call: most messages come from the held batch.
            if let message = held.nextHeld() { return message }
            return try await held.next()
        }

        /// Every message the iterator holds that is still valid for the current assignment, at
        /// once (waiting for the consumer's next batch when it holds none), in the order `next()`
        /// would give them; `nil` once the consumer shut down. Never empty. The messages are the
        /// caller's from then on: an iterator dropped later does not give them back.
        public mutating func nextBatch() async throws -> [KafkaConsumerMessage]? {
            try await held.nextBatch()
        }
    }
}

/// The batch an iterator is working through; returns the rest to the consumer when dropped.
///
/// Not `Sendable`: owned by one iterator, used by one task at a time.
final class HeldMessages {
    let consumer: KafkaConsumer
    private var batch: [KafkaConsumerMessage] = []
    private var index = 0
    private var epoch = 0

    init(consumer: KafkaConsumer) {
        self.consumer = consumer
    }

    deinit {
        guard index < batch.count else { return }
        let rest = MessageBatch(epoch: epoch, messages: Array(batch[index...]))
        let (waiter, handOver) = consumer.state.withLock { state -> (ConsumerStateMachine.Waiter?, MessageBatch?) in
            let waiter = state.giveBack(rest)
            defer { state.pendingGiveBack = nil }
            return (waiter, state.pendingGiveBack)
        }
        if let waiter, let handOver { waiter.resume(returning: handOver) }
    }

    /// The next message of the held batch if it is still valid for the current assignment;
    /// `nil` when the batch is used up or must be re-checked (then call ``next()``).
    @inline(__always)
    func nextHeld() -> KafkaConsumerMessage? {
        guard index < batch.count, consumer.epochMirror.load(ordering: .acquiring) == epoch else { return nil }
        index += 1
        return batch[index - 1]
    }

    /// Every message of the held batch still valid for the current assignment (fetching the next
    /// batch when it is used up), or `nil` once the consumer shut down.
    func nextBatch() async throws -> [KafkaConsumerMessage]? {
        guard try await refill() else { return nil }
        let taken = index == 0 ? batch : Array(batch[index...])
        batch = []
        index = 0
        return taken
    }

    func next() async throws -> KafkaConsumerMessage? {
        guard try await refill() else { return nil }
        index += 1
        return batch[index - 1]
    }

    /// Makes the held batch hold at least one message valid for the current assignment: re-checks
    /// it after an assignment change, fetches the next batch when it is used up. False once the
    /// consumer shut down.
    private func refill() async throws -> Bool {
        while true {
            if index < batch.count {
                guard consumer.epochMirror.load(ordering: .acquiring) != epoch else { return true }
                let remaining = MessageBatch(epoch: epoch, messages: Array(batch[index...]))
                let filtered = consumer.state.withLock { $0.filtered(remaining) }
                batch = filtered.messages
                index = 0
                epoch = filtered.epoch
                continue
            }
            guard let next = try await consumer.nextBatch() else {
                batch = []
                index = 0
                return false
            }
            batch = next.messages
            index = 0
            epoch = next.epoch
        }
    }
}
