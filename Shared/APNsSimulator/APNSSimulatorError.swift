/// An error of the simulator, with a stable code and classification flags.
public struct APNSSimulatorError: Error, Sendable, Hashable, CustomStringConvertible {
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
    /// Human-readable detail (never contains secrets).
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

    static func invalidConfiguration(_ message: String) -> APNSSimulatorError {
        APNSSimulatorError(code: .invalidConfiguration, message: message, isFatal: true)
    }
    static func invalidFaults(_ message: String) -> APNSSimulatorError {
        APNSSimulatorError(code: .invalidFaults, message: message)
    }
}
