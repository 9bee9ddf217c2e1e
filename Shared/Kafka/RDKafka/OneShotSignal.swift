import Locking
import ServiceLifecycle

/// A one-shot event async code can wait for (e.g. a dedicated thread reaching its end).
final class OneShotSignal: Sendable {
    private let event = OneShot<Void>()

    /// Signals the event (idempotent).
    func finish() {
        event.set(())
    }

    var isFinished: Bool { event.value != nil }

    /// Returns once the event happened.
    func wait() async {
        await event.wait()
    }

    /// Returns `true` once the event happened, or `false` if `timeout` ran out first.
    func wait(timeout: Duration?) async -> Bool {
        await event.wait(timeout: timeout) != nil
    }

    /// Returns once the event happened; graceful shutdown or cancellation of the waiting task
    /// signals it first (a Kafka client's `run()` waits for its stop this way).
    func waitUntilStopped() async {
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await wait()
            } onCancel: {
                self.finish()
            }
        } onGracefulShutdown: {
            self.finish()
        }
    }
}
