import CallpushCore
import Foundation
import Kafka

/// A configuration value that is missing or wrong, named by the key the operator has to fix.
/// Never carries a secret value.

/// A configuration value that is missing or wrong, named by its key (shared with the push-worker).
public typealias DispatchConfigurationError = ConfigurationError

/// Reads dispatch's configuration from the environment (every key, default and meaning is in
/// docs/dispatch.md), validating each value and naming the variable at fault. Secrets come
/// from files (`…_FILE`) or the environment, never from the command line.
public enum DispatchEnvironment {
    /// The configuration from `env`; the error names the first variable at fault.
    public static func load(_ env: [String: String] = ProcessInfo.processInfo.environment) throws(DispatchConfigurationError) -> DispatchConfiguration {
        let reader = EnvironmentReader(env: env)
        let (brokers, properties) = try reader.kafka()
        let apps = try appNames(path: try reader.required("CALLPUSH_APPS_FILE"), reader: reader)
        let keys = try APIKeysFile.load(path: try reader.required("CALLPUSH_DISPATCH_API_KEYS_FILE"), reader: reader)
        guard let secret = try reader.secret("CALLPUSH_ACK_SECRET") else {
            throw DispatchConfigurationError("CALLPUSH_ACK_SECRET_FILE", "required (or CALLPUSH_ACK_SECRET): the secret shared with the workers")
        }
        guard secret.utf8.count >= 32 else {
            throw DispatchConfigurationError("CALLPUSH_ACK_SECRET", "must be at least 32 bytes (it is \(secret.utf8.count))")
        }
        let podName = env["POD_NAME"].flatMap { $0.isEmpty ? nil : $0 }
        var configuration = DispatchConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: brokers, clientID: "callpush", properties: properties),
            apps: apps, apiKeys: keys, ackSecret: Array(secret.utf8),
            instanceID: env["CALLPUSH_DISPATCH_ID"] ?? podName ?? ProcessInfo.processInfo.hostName)
        configuration.requestsTopic = env["CALLPUSH_TOPIC_REQUESTS"] ?? configuration.requestsTopic
        configuration.statusTopic = env["CALLPUSH_TOPIC_STATUS"] ?? configuration.statusTopic
        configuration.host = env["CALLPUSH_DISPATCH_HOST"] ?? configuration.host
        configuration.port = try reader.int("CALLPUSH_DISPATCH_PORT", default: configuration.port, in: 0...65_535)
        var limits = DispatchLimits()
        limits.maxDevices = try reader.int("CALLPUSH_DISPATCH_MAX_DEVICES", default: limits.maxDevices, in: 1...100)
        let maxRing = try reader.int("CALLPUSH_DISPATCH_MAX_RING_TIMEOUT_SECONDS", default: 120, in: 1...600)
        limits.ringTimeoutSeconds = 1...maxRing
        limits.defaultRingTimeoutSeconds = try reader.int("CALLPUSH_DISPATCH_DEFAULT_RING_TIMEOUT_SECONDS", default: min(30, maxRing), in: 1...maxRing)
        limits.maxBodyBytes = try reader.int("CALLPUSH_DISPATCH_MAX_BODY_BYTES", default: limits.maxBodyBytes, in: 1_024...1_048_576)
        configuration.limits = limits
        configuration.publishTimeout = .milliseconds(try reader.int("CALLPUSH_DISPATCH_PUBLISH_TIMEOUT_MS", default: 5_000, in: 100...60_000))
        configuration.retryAfterSeconds = try reader.int("CALLPUSH_DISPATCH_RETRY_AFTER_SECONDS", default: 1, in: 1...3_600)
        configuration.idempotencyWindow = .seconds(try reader.int("CALLPUSH_DISPATCH_IDEMPOTENCY_WINDOW_SECONDS", default: 600, in: 1...86_400))
        configuration.idempotencyCapacity = try reader.int("CALLPUSH_DISPATCH_IDEMPOTENCY_CAPACITY", default: 100_000, in: 1...10_000_000)
        configuration.viewWindow = .seconds(try reader.int("CALLPUSH_DISPATCH_VIEW_WINDOW_SECONDS", default: 3_600, in: 60...604_800))
        configuration.viewCapacity = try reader.int("CALLPUSH_DISPATCH_VIEW_CAPACITY", default: 100_000, in: 1...10_000_000)
        configuration.eventStreamLimit = .seconds(try reader.int("CALLPUSH_DISPATCH_SSE_LIMIT_SECONDS", default: 600, in: 1...86_400))
        configuration.readinessProbeInterval = .milliseconds(try reader.int("CALLPUSH_DISPATCH_READINESS_PROBE_MS", default: 5_000, in: 100...600_000))
        if let text = env["CALLPUSH_DISPATCH_WEBHOOK_URL"], !text.isEmpty {
            guard let url = URL(string: text), url.scheme == "http", url.host != nil else {
                throw DispatchConfigurationError("CALLPUSH_DISPATCH_WEBHOOK_URL", "expected http://host[:port]/path")
            }
            guard let secret = try reader.secret("CALLPUSH_DISPATCH_WEBHOOK_SECRET"), secret.utf8.count >= 16 else {
                throw DispatchConfigurationError("CALLPUSH_DISPATCH_WEBHOOK_SECRET_FILE", "required with a webhook URL (at least 16 bytes)")
            }
            var webhook = WebhookConfiguration(url: url, secret: Array(secret.utf8))
            webhook.queueCapacity = try reader.int("CALLPUSH_DISPATCH_WEBHOOK_QUEUE", default: webhook.queueCapacity, in: 1...1_000_000)
            webhook.maxAttempts = try reader.int("CALLPUSH_DISPATCH_WEBHOOK_ATTEMPTS", default: webhook.maxAttempts, in: 1...100)
            configuration.webhook = webhook
        }
        configuration.warnings = reader.warnings
        return configuration
    }

    /// The app names of the worker's apps file (its keys); credentials are not read.
    static func appNames(path: String, reader: EnvironmentReader) throws(DispatchConfigurationError) -> Set<String> {
        let text = try reader.file(path, key: "CALLPUSH_APPS_FILE")
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], !object.isEmpty else {
            throw DispatchConfigurationError("CALLPUSH_APPS_FILE", "not a JSON object of apps")
        }
        return Set(object.keys)
    }
}

/// The API keys file (`CALLPUSH_DISPATCH_API_KEYS_FILE`): a JSON array of keys, stored hashed.
///
/// ```json
/// [{"name": "taxi-backend", "sha256": "<64 hex digits: SHA-256 of the key>", "ratePerSecond": 200, "burst": 400}]
/// ```
/// `ratePerSecond` (default 100) and `burst` (default 2 × rate) are optional.
/// Make a hash with `printf %s "$KEY" | sha256sum`.
public enum APIKeysFile {
    struct Entry: Decodable {
        var name: String
        var sha256: String
        var ratePerSecond: Double?
        var burst: Double?
    }

    /// Parses the keys file's content.
    public static func parse(_ data: Data) throws(DispatchConfigurationError) -> [APIKey] {
        let key = "CALLPUSH_DISPATCH_API_KEYS_FILE"
        let entries: [Entry]
        do {
            entries = try JSONDecoder().decode([Entry].self, from: data)
        } catch {
            throw DispatchConfigurationError(key, "not a JSON array of {name, sha256, ratePerSecond?, burst?}")
        }
        var keys: [APIKey] = []
        for (index, entry) in entries.enumerated() {
            guard !entry.name.isEmpty, entry.name.utf8.count <= 64,
                  entry.name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                throw DispatchConfigurationError("\(key) [\(index)].name", "1–64 of letters, digits, '.', '-', '_'")
            }
            guard let hash = hexBytes(entry.sha256), hash.count == 32 else {
                throw DispatchConfigurationError("\(key) \(entry.name).sha256", "expected 64 hex digits (SHA-256 of the key)")
            }
            let rate = entry.ratePerSecond ?? 100
            guard rate > 0, rate <= 1_000_000, (entry.burst ?? 1) >= 1 else {
                throw DispatchConfigurationError("\(key) \(entry.name).ratePerSecond", "rate must be > 0 and burst ≥ 1")
            }
            keys.append(APIKey(name: entry.name, sha256: hash, ratePerSecond: rate, burst: entry.burst))
        }
        guard !keys.isEmpty else { throw DispatchConfigurationError(key, "no API keys configured") }
        return keys
    }

    static func load(path: String, reader: EnvironmentReader) throws(DispatchConfigurationError) -> [APIKey] {
        try parse(Data(try reader.file(path, key: "CALLPUSH_DISPATCH_API_KEYS_FILE").utf8))
    }

    static func hexBytes(_ text: String) -> [UInt8]? {
        let chars = Array(text.lowercased().utf8)
        guard chars.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: chars.count, by: 2) {
            guard let high = hexValue(chars[index]), let low = hexValue(chars[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }
}
