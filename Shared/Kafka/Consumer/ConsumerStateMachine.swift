/// Messages fetched together, tagged with the assignment epoch at which they were fetched.
struct MessageBatch {
    var epoch: Int
    var messages: [KafkaConsumerMessage]

    /// What the batch's messages hold (the buffer's byte bound).
    var bytes: Int { messages.reduce(0) { $0 + $1.bufferedBytes } }
}

extension KafkaConsumerMessage {
    /// The bytes a buffered message holds: key, value and header values.
    var bufferedBytes: Int {
        value.count + (key?.count ?? 0) + headers.reduce(0) { $0 + ($1.value?.count ?? 0) }
    }
}

/// The consumer's buffer between the poll thread and the application, its assignment view
/// and its lifecycle. Kept behind a `Mutex` by ``KafkaConsumer``; methods return what to do.
///
/// Assignment epochs: every assignment change (assign, revoke, seek) bumps `epoch` and
/// records, for each assigned partition, the epoch from which its messages are valid. A
/// message is delivered only if its partition is assigned and it was fetched at or after
/// that epoch — so buffered messages of revoked (or sought) partitions are dropped.
struct ConsumerStateMachine {
    typealias Waiter = CheckedContinuation<MessageBatch?, any Error>

    enum Lifecycle {
        case running
        case failed(KafkaError)
        case finished
    }

    private(set) var lifecycle: Lifecycle = .running
    private(set) var epoch = 0
    /// Assigned partitions and the epoch from which their messages are valid.
    private(set) var assigned: [KafkaTopicPartition: Int] = [:]
    private var batches: [MessageBatch] = []
    private var head = 0
    private(set) var bufferedCount = 0
    /// ``MessageBatch/bytes`` of the buffered batches.
    private(set) var bufferedBytes = 0
    private var waiters: [(id: Int, waiter: Waiter)] = []
    /// Partitions the application paused (kept paused across back-pressure resumes).
    private(set) var userPaused: Set<KafkaTopicPartition> = []
    /// Partitions being revoked whose revoke handler is still running, with the epoch their
    /// assignment began at: offsets of that assignment's messages may still be stored.
    private(set) var revoking: [KafkaTopicPartition: Int] = [:]
    /// Whether the poll thread paused the assignment because the buffer is full.
    var backpressurePaused = false
    /// Partitions librdkafka holds paused at our request. librdkafka keeps a partition's pause
    /// across unassign and re-assign, and in 2.0.2 resuming a partition that is not paused
    /// restarts its fetch from an old position (re-delivery; fixed in 2.4.0). So every pause and
    /// resume goes through ``pauseChanges()``, which pauses and resumes exactly the difference.
    private(set) var fetchPaused: Set<KafkaTopicPartition> = []
    /// Group mode: assigned partitions whose assign handler has not returned yet, with the epoch
    /// their assignment began at. They are held paused (see ``pauseChanges()``) so that none of
    /// their messages reaches the application before the handler returned, however long it takes.
    private(set) var awaitingAssignHandler: [KafkaTopicPartition: Int] = [:]
    /// How many times the poll thread paused for back-pressure (observability, tests).
    var backpressurePauses = 0
    /// Assigned partitions that delivered a message since their assignment (or last seek) began.
    /// Back-pressure pauses only these: until its first message, librdkafka may still be looking up
    /// where the partition starts, and in 2.0.2 a pause or resume during that lookup (a version bump)
    /// leaves the lookup's retry timer armed; it fires later, with the partition fetching, and sets
    /// it back to its first offset, so everything delivered since comes again (docs/kafka.md,
    /// "Back-pressure and a partition's start").
    private(set) var delivering: Set<KafkaTopicPartition> = []
    /// Set by ``append(_:limits:)`` when a partition began delivering while fetching is paused for
    /// back-pressure: the poll thread must pause it too (``takePauseSyncNeeded()``).
    private var pauseSyncNeeded = false

    // MARK: assignment

    /// Group mode: `partitions` were assigned; they are held until ``assignHandlerFinished(epoch:)``
    /// with the epoch this leaves in ``epoch``.
    mutating func assign(_ partitions: [KafkaTopicPartition]) {
        epoch += 1
        for partition in partitions {
            assigned[partition] = epoch
            awaitingAssignHandler[partition] = epoch
            delivering.remove(partition)
        }
    }

    /// The assign handler of the assignment that began at `epoch` returned: its partitions may
    /// fetch, if they are still in that assignment (a partition revoked and assigned again since
    /// waits for its new assignment's handler). Returns whether a partition was released.
    mutating func assignHandlerFinished(epoch assignmentEpoch: Int) -> Bool {
        let released = awaitingAssignHandler.filter { $0.value == assignmentEpoch }.keys
        for partition in released { awaitingAssignHandler[partition] = nil }
        return !released.isEmpty
    }

    /// Replaces the whole assignment (manual mode).
    mutating func replaceAssignment(_ partitions: [KafkaTopicPartition]) {
        epoch += 1
        assigned = [:]
        awaitingAssignHandler = [:]
        delivering = []
        for partition in partitions { assigned[partition] = epoch }
        dropInvalid()
    }

    /// Stops delivery for `partitions`; their offsets may still be stored until ``endRevoke()``.
    mutating func revoke(_ partitions: [KafkaTopicPartition]) {
        epoch += 1
        for partition in partitions {
            if let since = assigned.removeValue(forKey: partition) { revoking[partition] = since }
            awaitingAssignHandler[partition] = nil
            delivering.remove(partition)
        }
        dropInvalid()
    }

    /// The revoke handler returned: stores for revoked partitions fail from now on.
    mutating func endRevoke() {
        revoking = [:]
    }

    /// Whether an offset may be stored for `partition`.
    func canStore(_ partition: KafkaTopicPartition) -> Bool {
        assigned[partition] != nil || revoking[partition] != nil
    }

    /// Whether `message`'s offset may be stored: its partition is assigned (or its revoke handler
    /// is running) and the message was fetched in that assignment, not in an earlier one whose
    /// uncommitted messages the partition's new assignment delivers again.
    func canStore(_ message: KafkaConsumerMessage) -> Bool {
        guard let since = assigned[message.topicPartition] ?? revoking[message.topicPartition] else { return false }
        return message.fetchEpoch >= since
    }

    /// After a seek: messages of `partition` fetched before now are stale.
    mutating func invalidate(_ partition: KafkaTopicPartition) {
        epoch += 1
        if assigned[partition] != nil { assigned[partition] = epoch }
        delivering.remove(partition)
        dropInvalid()
    }

    mutating func setUserPaused(_ partitions: [KafkaTopicPartition], paused: Bool) {
        if paused { userPaused.formUnion(partitions) } else { userPaused.subtract(partitions) }
    }

    /// What to pause and resume in librdkafka so that exactly the assigned partitions the
    /// application paused, those whose assign handler still runs (or all of them, under
    /// back-pressure) are paused, and no partition outside the assignment is left paused.
    /// Records the result as librdkafka's state.
    mutating func pauseChanges() -> (pause: [KafkaTopicPartition], resume: [KafkaTopicPartition]) {
        let wanted = Set(assigned.keys.filter {
            (backpressurePaused && delivering.contains($0)) || userPaused.contains($0) || awaitingAssignHandler[$0] != nil
        })
        let pause = wanted.subtracting(fetchPaused)
        let resume = fetchPaused.subtracting(wanted)
        fetchPaused = wanted
        return (Array(pause), Array(resume))
    }

    /// Whether librdkafka holds `partition` paused at our request (its fetching is stopped).
    func isFetchPaused(_ partition: KafkaTopicPartition) -> Bool {
        fetchPaused.contains(partition)
    }

    func isValid(_ message: KafkaConsumerMessage, fetchedAt batchEpoch: Int) -> Bool {
        guard let since = assigned[message.topicPartition] else { return false }
        return batchEpoch >= since
    }

    /// Keeps only messages still valid; returns the batch re-tagged with the current epoch.
    func filtered(_ batch: MessageBatch) -> MessageBatch {
        guard isRunning else { return MessageBatch(epoch: epoch, messages: []) }
        return MessageBatch(epoch: epoch, messages: batch.messages.filter { isValid($0, fetchedAt: batch.epoch) })
    }

    private mutating func dropInvalid() {
        var kept: [MessageBatch] = []
        var count = 0
        var bytes = 0
        for index in head..<batches.count {
            let batch = filtered(batches[index])
            if !batch.messages.isEmpty {
                count += batch.messages.count
                bytes += batch.bytes
                kept.append(batch)
            }
        }
        batches = kept
        head = 0
        bufferedCount = count
        bufferedBytes = bytes
    }

    // MARK: buffer

    enum AppendAction {
        /// Hand this batch to a waiting iterator.
        case resume(Waiter, MessageBatch)
        /// Buffered. `overLimit`: the buffer reached one of its bounds; pause fetching.
        case buffered(overLimit: Bool)
        /// Dropped (finished, failed, or nothing valid left).
        case dropped
    }

    /// The poll thread appends a batch fetched while the epoch was `batch.epoch`; `limits` are the
    /// buffer's bounds in messages and in bytes.
    mutating func append(_ batch: MessageBatch, limits: BufferLimits) -> AppendAction {
        guard case .running = lifecycle else { return .dropped }
        let batch = batch.epoch == epoch ? batch : filtered(batch)
        guard !batch.messages.isEmpty else { return .dropped }
        noteDelivering(batch.messages)
        if !waiters.isEmpty {
            return .resume(waiters.removeFirst().waiter, batch)
        }
        batches.append(batch)
        bufferedCount += batch.messages.count
        bufferedBytes += batch.bytes
        return .buffered(overLimit: bufferedCount >= limits.messages || bufferedBytes >= limits.bytes)
    }

    /// The buffer's bounds: fetching pauses when either is reached.
    struct BufferLimits {
        var messages: Int
        var bytes: Int
    }

    /// Fetching paused for back-pressure and the buffer is down to half of both bounds: resume.
    func mayResume(_ limits: BufferLimits) -> Bool {
        backpressurePaused && bufferedCount <= limits.messages / 2 && bufferedBytes <= limits.bytes / 2
    }

    /// Records the partitions `messages` come from as delivering (one set lookup per run of a partition).
    private mutating func noteDelivering(_ messages: [KafkaConsumerMessage]) {
        var last: (partition: Int32, topic: String)?
        for message in messages where last?.partition != message.partition || last?.topic != message.topic {
            last = (message.partition, message.topic)
            if delivering.insert(message.topicPartition).inserted, backpressurePaused { pauseSyncNeeded = true }
        }
    }

    /// Whether a partition began delivering while fetching is paused for back-pressure (and so must
    /// be paused as well); clears the flag.
    mutating func takePauseSyncNeeded() -> Bool {
        defer { pauseSyncNeeded = false }
        return pauseSyncNeeded
    }

    /// An iterator went away holding messages it had not handed out: they go back to the
    /// front of the buffer (or to a waiting iterator), so nothing is skipped.
    mutating func giveBack(_ batch: MessageBatch) -> Waiter? {
        guard case .running = lifecycle else { return nil }
        let batch = batch.epoch == epoch ? batch : filtered(batch)
        guard !batch.messages.isEmpty else { return nil }
        if !waiters.isEmpty {
            pendingGiveBack = batch
            return waiters.removeFirst().waiter
        }
        if head > 0 {
            head -= 1
            batches[head] = batch
        } else {
            batches.insert(batch, at: 0)
        }
        bufferedCount += batch.messages.count
        bufferedBytes += batch.bytes
        return nil
    }

    /// Set by ``giveBack(_:)`` for the waiter it returned (resumed outside the lock).
    var pendingGiveBack: MessageBatch?

    enum NextAction {
        case batch(MessageBatch)
        case wait
        case end
        case fail(KafkaError)
    }

    /// An iterator wants the next batch.
    mutating func next() -> NextAction {
        if head < batches.count {
            let batch = batches[head]
            // The batch is the application's now: drop the buffer's reference at once, or its messages
            // stay alive until the array is compacted below (up to 64 batches, ~65,000 messages, while
            // the application keeps the buffer from running empty).
            batches[head].messages = []
            head += 1
            bufferedCount -= batch.messages.count
            bufferedBytes -= batch.bytes
            if head == batches.count {
                batches.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 64 {
                batches.removeFirst(head)
                head = 0
            }
            return .batch(batch)
        }
        switch lifecycle {
        case .running: return .wait
        case .failed(let error):
            lifecycle = .finished
            return .fail(error)
        case .finished: return .end
        }
    }

    /// Iterators waiting for a batch.
    var waiterCount: Int { waiters.count }

    mutating func addWaiter(_ waiter: Waiter, id: Int) {
        waiters.append((id, waiter))
    }

    /// An iterator's task was cancelled: returns its waiter to resume, if still waiting.
    mutating func removeWaiter(id: Int) -> Waiter? {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return waiters.remove(at: index).waiter
    }

    /// Ends delivery (close or fatal error); returns the waiters to resume.
    mutating func finish(error: KafkaError?) -> [Waiter] {
        if case .running = lifecycle {
            lifecycle = error.map { .failed($0) } ?? .finished
        }
        epoch += 1  // iterators drop what they still hold
        awaitingAssignHandler = [:]
        batches = []
        head = 0
        bufferedCount = 0
        bufferedBytes = 0
        defer { waiters = [] }
        return waiters.map(\.waiter)
    }

    /// Messages the buffer's storage references (tests: must equal ``bufferedCount``).
    var retainedMessageCount: Int { batches.reduce(0) { $0 + $1.messages.count } }

    var isRunning: Bool {
        if case .running = lifecycle { return true }
        return false
    }
}
