/// The start/stop states both simulators go through, as a value kept behind the simulator's lock:
/// `start()` binds once (a second call while starting or running does nothing), a `stop()` that
/// runs while `start()` is binding wins, and a stopped simulator stays stopped.
///
/// `Running` is what a started simulator holds (its listeners or its service group, and ports).
public struct SimulatorLifecycle<Running: Sendable>: Sendable {
    private enum State: Sendable {
        case idle
        case starting
        case running(Running)
        case stopped
    }

    private var state = State.idle

    public init() {}

    /// What is running now (nil before start, while binding and after stop).
    public var running: Running? {
        if case .running(let running) = state { return running }
        return nil
    }

    /// Asked to start: true when the caller must bind (now starting), false when it is starting
    /// or running already.
    /// - Throws: ``SimulatorError`` `startFailed` once stopped.
    public mutating func beginStart() throws(SimulatorError) -> Bool {
        switch state {
        case .idle:
            state = .starting
            return true
        case .starting, .running:
            return false
        case .stopped:
            throw SimulatorError(code: .startFailed, message: "a stopped simulator cannot be restarted")
        }
    }

    /// Binding succeeded: true when `running` is now the running state; false when `stop()` ran
    /// meanwhile — the caller closes what it bound and throws ``SimulatorError/stoppedWhileStarting``.
    public mutating func finishStart(_ running: Running) -> Bool {
        guard case .starting = state else { return false }
        state = .running(running)
        return true
    }

    /// Binding failed: back to idle, so `start()` may be tried again.
    public mutating func failStart() {
        if case .starting = state { state = .idle }
    }

    /// Stops for good; what was running, if anything, for the caller to close.
    public mutating func stop() -> Running? {
        defer { state = .stopped }
        return running
    }
}

extension SimulatorError {
    /// `start()` bound its listeners but `stop()` ran meanwhile.
    public static var stoppedWhileStarting: SimulatorError {
        SimulatorError(code: .startFailed, message: "stopped while starting")
    }
}
