/// A configuration value that is missing or wrong, named by the key (environment variable or
/// apps-file field) the operator has to fix. Never carries a secret value.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var key: String
    public var problem: String

    public init(_ key: String, _ problem: String) {
        self.key = key
        self.problem = problem
    }

    public var description: String { "\(key): \(problem)" }
}
