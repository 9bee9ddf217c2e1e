import Foundation

/// Reads environment values, files and secrets with errors naming the key, and notes secret
/// files that other users can read (a warning, logged at start: `chmod 600` them).
public final class EnvironmentReader {
    public let env: [String: String]
    /// Secret files other users can access (logged as warnings at start; never secret values).
    public private(set) var warnings: [String] = []

    public init(env: [String: String]) { self.env = env }

    /// Notes a warning when the secret file at `path` is readable or writable by group or others.
    public func auditSecretFile(_ path: String, key: String) {
        if let warning = SecretFileAudit.warning(path: path, key: key) { warnings.append(warning) }
    }

    public func required(_ key: String) throws(ConfigurationError) -> String {
        guard let value = env[key], !value.isEmpty else { throw ConfigurationError(key, "required") }
        return value
    }

    public func int(_ key: String, default value: Int, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let text = env[key] else { return value }
        guard let number = Int(text), range.contains(number) else {
            throw ConfigurationError(key, "expected a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    /// The content of `path` (one trailing line end, `\n` or `\r\n`, removed).
    public func file(_ path: String, key: String) throws(ConfigurationError) -> String {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError(key, "cannot read file \(path)")
        }
        // In Swift "\r\n" is one Character, so `hasSuffix("\n")` alone misses a CRLF line end.
        if text.hasSuffix("\r\n") || text.hasSuffix("\n") { return String(text.dropLast()) }
        return text
    }

    /// A secret from `<KEY>_FILE` (preferred) or `<KEY>`; nil when neither is set.
    public func secret(_ key: String) throws(ConfigurationError) -> String? {
        if let path = env[key + "_FILE"] {
            auditSecretFile(path, key: key + "_FILE")
            return try file(path, key: key + "_FILE")
        }
        return env[key]
    }

    /// `CALLPUSH_KAFKA_BOOTSTRAP` as brokers, and every other `CALLPUSH_KAFKA_<PROPERTY>` as a
    /// librdkafka property (`_` → `.`, lower-cased; values may be `file:` / `env:` references).
    public func kafka() throws(ConfigurationError) -> (brokers: [String], properties: [String: String]) {
        let bootstrap = try required("CALLPUSH_KAFKA_BOOTSTRAP")
        let brokers = bootstrap.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !brokers.isEmpty, brokers.allSatisfy({ $0.contains(":") }) else {
            throw ConfigurationError("CALLPUSH_KAFKA_BOOTSTRAP", "expected host:port[,host:port…]")
        }
        var properties: [String: String] = [:]
        for (key, value) in env where key.hasPrefix("CALLPUSH_KAFKA_") && key != "CALLPUSH_KAFKA_BOOTSTRAP" {
            properties[key.dropFirst("CALLPUSH_KAFKA_".count).lowercased().replacingOccurrences(of: "_", with: ".")] = value
        }
        return (brokers, properties)
    }
}
