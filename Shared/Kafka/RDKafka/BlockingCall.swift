import Foundation
import Locking

/// Runs blocking librdkafka calls (flush, close, destroy, committed, offsets-for-times,
/// watermark queries) on a dedicated thread, never on Swift's cooperative pool.
enum BlockingCall {
    /// Runs `body` on a new thread named `name` and returns its result.
    static func run<T: Sendable>(_ name: String, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: body()) }
            thread.name = name
            thread.start()
        }
    }

    /// Runs `body` on a new thread; returns `nil` if it has not finished after `deadline`.
    /// The thread is then abandoned (it keeps running until the C call returns); callers
    /// use this for calls known to hang occasionally, such as `rd_kafka_destroy`.
    static func run<T: Sendable>(
        _ name: String,
        deadline: Duration,
        _ body: @escaping @Sendable () -> T
    ) async -> T? {
        let once = OnceResumer<T?>()
        return await withCheckedContinuation { continuation in
            once.install(continuation)
            let thread = Thread { once.resume(with: body()) }
            thread.name = name
            thread.start()
            let timer = Task {
                try? await Task.sleep(for: deadline)
                once.resume(with: nil)
            }
            once.onResume { timer.cancel() }
        }
    }
}

/// Resumes a continuation exactly once, from whichever side finishes first.
private final class OnceResumer<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, Never>?
        var resumed = false
        var onResume: (@Sendable () -> Void)?
    }
    private let state = Locked(State())

    func install(_ continuation: CheckedContinuation<T, Never>) {
        state.withLock { $0.continuation = continuation }
    }

    func onResume(_ action: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            if state.resumed { return true }
            state.onResume = action
            return false
        }
        if runNow { action() }
    }

    func resume(with value: T) {
        let (continuation, action) = state.withLock { state -> (CheckedContinuation<T, Never>?, (@Sendable () -> Void)?) in
            guard !state.resumed else { return (nil, nil) }
            state.resumed = true
            defer { state.continuation = nil; state.onResume = nil }
            return (state.continuation, state.onResume)
        }
        continuation?.resume(returning: value)
        action?()
    }
}
