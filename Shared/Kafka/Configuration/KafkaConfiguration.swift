import Foundation

/// Connection settings shared by producers and consumers.
///
/// Any librdkafka property (see librdkafka's CONFIGURATION.md) can be set in ``properties``,
/// which is how services reach secured clusters (`security.protocol`, `sasl.mechanism`,
/// `sasl.username`, `sasl.password`, `ssl.ca.location`, `ssl.certificate.location`, ...).
///
/// ## Secret values
/// A property value may name where the value comes from instead of holding it:
/// - `file:/path/to/file` — the content of the file (one trailing newline removed);
/// - `env:NAME` — the value of environment variable `NAME`;
/// - `literal:text` — exactly `text` (to write a value that itself starts with `file:` or `env:`);
/// - anything else is used as written.
///
/// Values are resolved when the client is created; a missing file or variable is a
/// ``KafkaError/Code/configuration`` error naming the property (never the value).
/// Secret properties (passwords, keys, `sasl.oauthbearer.*`, `sasl.jaas.config`, ...)
/// are redacted in ``description`` and never logged.
public struct KafkaConfiguration: Sendable, Hashable, CustomStringConvertible {
    /// `bootstrap.servers`: initial brokers, e.g. `["kafka-1:9092", "kafka-2:9092"]`.
    public var bootstrapServers: [String]
    /// `client.id`: shows up in broker logs and metrics. Default `callpush`.
    public var clientID: String
    /// Additional librdkafka properties; they override the layer's defaults.
    /// Values may use the `file:` / `env:` / `literal:` scheme described above.
    public var properties: [String: String]

    /// Creates a configuration.
    public init(bootstrapServers: [String], clientID: String = "callpush", properties: [String: String] = [:]) {
        self.bootstrapServers = bootstrapServers
        self.clientID = clientID
        self.properties = properties
    }

    /// All properties as given to librdkafka (before secret resolution), with `bootstrap.servers`
    /// and `client.id` included.
    var rawProperties: [String: String] {
        var all = properties
        all["bootstrap.servers"] = bootstrapServers.joined(separator: ",")
        all["client.id"] = clientID
        return all
    }

    public var description: String {
        Self.redactedDescription(of: rawProperties)
    }

    /// Whether the value of `key` is secret and must never be printed or logged.
    public static func isSecret(key: String) -> Bool {
        let lower = key.lowercased()
        return lower.contains("password") || lower.contains("secret") || lower.hasPrefix("sasl.oauthbearer.")
            || lower == "ssl.key.pem" || lower == "ssl_key" || lower == "sasl.jaas.config"
            || lower.contains("private")
    }

    /// Renders properties sorted by key with secret values replaced by `<redacted>`.
    static func redactedDescription(of properties: [String: String]) -> String {
        let items = properties.keys.sorted().map { key -> String in
            let value = Self.isSecret(key: key) ? "<redacted>" : (properties[key] ?? "")
            return "\(key)=\(value)"
        }
        return "KafkaConfiguration(\(items.joined(separator: ", ")))"
    }

    /// Resolves the `file:` / `env:` / `literal:` scheme of one property value.
    ///
    /// - Parameter environment: the environment to read `env:` names from (tests inject one).
    static func resolve(
        key: String,
        value: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(KafkaError) -> String {
        if value.hasPrefix("literal:") {
            return String(value.dropFirst("literal:".count))
        }
        if value.hasPrefix("env:") {
            let name = String(value.dropFirst("env:".count))
            guard let resolved = environment[name] else {
                throw KafkaError(
                    code: .configuration,
                    message: "property '\(key)': environment variable '\(name)' is not set"
                )
            }
            return resolved
        }
        if value.hasPrefix("file:") {
            let path = String(value.dropFirst("file:".count))
            guard let data = FileManager.default.contents(atPath: path),
                var text = String(data: data, encoding: .utf8)
            else {
                throw KafkaError(code: .configuration, message: "property '\(key)': cannot read file '\(path)'")
            }
            if text.hasSuffix("\r\n") {
                text.removeLast(1)  // "\r\n" is one Character
            } else if text.hasSuffix("\n") {
                text.removeLast()
            }
            return text
        }
        return value
    }
}
