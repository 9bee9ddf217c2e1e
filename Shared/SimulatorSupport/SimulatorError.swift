/// An error of a simulator (APNs or FCM), with a stable code and classification flags.
/// `APNSSimulatorError` and `FCMSimulatorError` are this type.
public struct SimulatorError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable machine-readable codes.
    public enum Code: String, Sendable, Hashable {
        /// The configuration is unusable (bad key, bad certificate file, bad port…).
        case invalidConfiguration
        /// A fault set was rejected.
        case invalidFaults
        /// Binding or starting a listener failed.
        case startFailed
        /// An operation needs a started simulator.
        case notStarted
        /// Writing a file failed.
        case ioFailed
    }

    /// The stable code.
    public var code: Code
    /// Human-readable detail (never contains secrets or key material).
    public var message: String
    /// Whether retrying the same operation may succeed.
    public var isRetryable: Bool
    /// Whether the simulator cannot continue.
    public var isFatal: Bool

    /// Creates an error.
    public init(code: Code, message: String, isRetryable: Bool = false, isFatal: Bool = false) {
        self.code = code
        self.message = message
        self.isRetryable = isRetryable
        self.isFatal = isFatal
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }

    /// An unusable configuration (fatal).
    public static func invalidConfiguration(_ message: String) -> SimulatorError {
        SimulatorError(code: .invalidConfiguration, message: message, isFatal: true)
    }

    /// A rejected fault set.
    public static func invalidFaults(_ message: String) -> SimulatorError {
        SimulatorError(code: .invalidFaults, message: message)
    }

    // The rules both simulators' faults share; each error names the field.

    /// A probability: a number in 0...1.
    public static func checkProbability(_ value: Double, _ field: String) throws(SimulatorError) {
        guard value.isFinite, (0...1).contains(value) else { throw invalidFaults("\(field) must be in 0...1") }
    }

    /// An optional whole number that, when set, lies in `range`.
    public static func check(_ value: Int?, in range: ClosedRange<Int>, _ field: String) throws(SimulatorError) {
        if let value, !range.contains(value) { throw invalidFaults("\(field) must be in \(range)") }
    }

    /// An optional whole number that, when set, is at least `minimum`.
    public static func check(_ value: Int?, atLeast minimum: Int, _ field: String) throws(SimulatorError) {
        if let value, value < minimum { throw invalidFaults("\(field) must be >= \(minimum)") }
    }
}
