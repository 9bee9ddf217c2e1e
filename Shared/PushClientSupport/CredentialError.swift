/// A credential or client setting that cannot be loaded or used. Always fatal, never retried:
/// fix the configuration. Each client names its own stable codes (``Code``), so
/// `APNSCredentialError` and `FCMCredentialError` stay distinct types.
public struct CredentialError<Code: RawRepresentable & Sendable & Hashable>: Error, Sendable, Hashable, CustomStringConvertible
where Code.RawValue == String {
    public var code: Code
    public var message: String
    /// Credential errors are never retryable.
    public var isRetryable: Bool { false }
    /// Credential errors are always fatal.
    public var isFatal: Bool { true }

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
