/// An error of the simulator, with a stable code.
public struct FCMSimulatorError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable machine-readable codes.
    public enum Code: String, Sendable, Hashable {
        /// The configuration is unusable (bad key, bad certificate file, bad port…).
        case invalidConfiguration
        /// A fault set was rejected.
        case invalidFaults
        /// Binding or starting a listener failed.
        case startFailed
        /// Writing a file failed.
        case ioFailed
    }

    /// The stable code.
    public var code: Code
    /// Human-readable detail (never contains key material).
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    static func invalidConfiguration(_ message: String) -> FCMSimulatorError { .init(code: .invalidConfiguration, message: message) }
    static func invalidFaults(_ message: String) -> FCMSimulatorError { .init(code: .invalidFaults, message: message) }
}
