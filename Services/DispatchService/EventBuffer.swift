import DequeModule
import Locking
import NIOCore

/// What one SSE stream has not written yet: encoded frames, bounded in bytes. When a slow reader
/// lets it fill, the oldest frames are dropped (each status is a snapshot of its delivery and
/// carries its event id, so a later frame supersedes an earlier one of the same delivery); the end
/// of the stream is never dropped.
public final class EventBuffer: Sendable {
    /// What the writer takes next.
    public enum Item: Sendable, Equatable {
        case frame(ByteBuffer)
        /// `event: end`: every delivery is terminal (`true`), or the stream is ended early.
        case end(complete: Bool)
    }

    private struct State {
        var frames: Deque<ByteBuffer> = []
        var bytes = 0
        var end: Bool?
        var dropped = 0
        var waiter: CheckedContinuation<Item?, Never>?
        var cancelled = false
    }

    /// Most bytes of frames held.
    public let limit: Int
    private let state = Locked(State())

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Queues a frame (dropping the oldest beyond the limit); ignored once the end is queued.
    public func push(_ frame: ByteBuffer) {
        let waiter = state.withLock { state -> CheckedContinuation<Item?, Never>? in
            guard state.end == nil, !state.cancelled else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.frames.append(frame)
            state.bytes += frame.readableBytes
            while state.bytes > limit, state.frames.count > 1, let oldest = state.frames.popFirst() {
                state.bytes -= oldest.readableBytes
                state.dropped += 1
            }
            return nil
        }
        waiter?.resume(returning: .frame(frame))
    }

    /// Queues a keep-alive comment when nothing else is waiting to be written.
    public func keepalive() {
        let isIdle = state.withLock { $0.frames.isEmpty && $0.end == nil }
        if isIdle { push(ByteBuffer(string: ": keepalive\n\n")) }
    }

    /// Ends the stream after the queued frames (the first end wins).
    public func finish(complete: Bool) {
        let waiter = state.withLock { state -> CheckedContinuation<Item?, Never>? in
            guard state.end == nil else { return nil }
            state.end = complete
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: .end(complete: complete))
    }

    /// The next frame, then the end, then nil. Task cancellation returns nil.
    public func next() async -> Item? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Item?, Never>) in
                let ready = state.withLock { state -> Item?? in
                    if state.cancelled { return .some(nil) }
                    if let frame = state.frames.popFirst() {
                        state.bytes -= frame.readableBytes
                        return .some(.frame(frame))
                    }
                    if let end = state.end {
                        state.cancelled = true
                        return .some(.end(complete: end))
                    }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Item?, Never>? in
                state.cancelled = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Bytes held now.
    public var bytes: Int { state.withLock { $0.bytes } }
    /// Frames dropped because the reader was too slow.
    public var dropped: Int { state.withLock { $0.dropped } }
}
