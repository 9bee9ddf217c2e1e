import SimulatorSupport

/// An error of the simulator, with a stable code and classification flags (shared with the APNs simulator).
public typealias FCMSimulatorError = SimulatorError
