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
