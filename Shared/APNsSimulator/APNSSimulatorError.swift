import SimulatorSupport

/// An error of the simulator, with a stable code and classification flags (shared with the FCM simulator).
public typealias APNSSimulatorError = SimulatorError
