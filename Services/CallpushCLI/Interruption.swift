import Dispatch
import Foundation
import Locking

/// "Stop at the next safe point": set by SIGINT / SIGTERM (``installSignalHandlers()``) or by a
/// test. Long-running commands check it between records and stop cleanly.
final class Interruption: Sendable {
    private struct State {
        var requested = false
        var handlers: [@Sendable () -> Void] = []
    }
    private let state = Locked(State())
    /// Signal sources, kept alive while the handlers are installed.
    private let sources = Locked<[any DispatchSourceSignal]>([])

    init() {}

    var isRequested: Bool { state.withLock { $0.requested } }

    /// Requests the stop and runs the registered handlers once.
    func request() {
        let handlers = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.requested else { return [] }
            state.requested = true
            defer { state.handlers = [] }
            return state.handlers
        }
        for handler in handlers { handler() }
    }

    /// Runs `handler` when the stop is requested (at once if it already was).
    func onRequest(_ handler: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.requested { return true }
            state.handlers.append(handler)
            return false
        }
        if now { handler() }
    }

    /// Turns SIGINT and SIGTERM into ``request()`` (instead of killing the process).
    func installSignalHandlers() {
        sources.withLock { sources in
            for signalNumber in [SIGINT, SIGTERM] {
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
                source.setEventHandler { [weak self] in self?.request() }
                source.resume()
                sources.append(source)
            }
        }
    }
}
