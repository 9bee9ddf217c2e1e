import Foundation

/// How much longer the tests' time bounds are in this run.
///
/// `CALLPUSH_TEST_TIME_SCALE` (default 1): `scripts/tsan` and `scripts/asan` raise it, because a
/// sanitizer slows everything 5–15×, and a bound that only stands for "a healthy machine answers
/// in time" (an APNs request timeout, a ring deadline, a test's wait for statuses) would otherwise
/// expire and turn into retries, expiries and failures the test did not mean to provoke. Bounds a
/// test *asserts* on (e.g. "503 within the configured bound") are scaled the same way; a test's
/// figures never depend on it.
public enum TestTiming {
    public static let scale: Double = {
        guard let text = ProcessInfo.processInfo.environment["CALLPUSH_TEST_TIME_SCALE"],
              let value = Double(text), value >= 1, value <= 100 else { return 1 }
        return value
    }()

    public static func scaled(_ duration: Duration) -> Duration { duration * scale }
    public static func scaled(seconds: Double) -> Double { seconds * scale }
}

/// A test's wait outlived its bound: something hung.
public struct TestTimeout: Error, CustomStringConvertible {
    /// What was waited for.
    public var what: String

    public init(what: String = "the test body") {
        self.what = what
    }

    public var description: String { "timed out: \(what) (something hung)" }
}

/// Runs `body`, failing with ``TestTimeout`` naming `what` when it takes longer than `seconds`
/// (scaled by ``TestTiming/scale``); the body is cancelled then.
public func withTimeout<T: Sendable>(_ what: String = "the test body", seconds: Double,
                                     _ body: () async throws -> T) async throws -> T {
    try await withoutActuallyEscaping(body) { body in
        // The group is awaited before this returns, so the non-escaping body never outlives the call.
        let box = UnsafeSendableBox(body)
        return try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await box.value() }
            group.addTask {
                try await Task.sleep(for: .seconds(TestTiming.scaled(seconds: seconds)))
                throw TestTimeout(what: what)
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw TestTimeout(what: what) }
            return first
        }
    }
}

private struct UnsafeSendableBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// Checks `condition` every `interval` until it holds or `seconds` (scaled by ``TestTiming/scale``)
/// have passed, then once more; whether it held. Throws what `condition` throws, and
/// `CancellationError` when the test is cancelled.
public func eventually(seconds: Double = 10, every interval: Duration = .milliseconds(5),
                       _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + .seconds(TestTiming.scaled(seconds: seconds))
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: interval)
    }
    return try await condition()
}
