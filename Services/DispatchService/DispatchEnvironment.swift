import CallContract
import CallpushCore
import Foundation
import Kafka
import Locking

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
        let keysFile = try APIKeysFile.load(path: try reader.required("CALLPUSH_DISPATCH_API_KEYS_FILE"), knownApps: apps, reader: reader)
        guard let secret = try reader.secret("CALLPUSH_ACK_SECRET") else {
            throw DispatchConfigurationError("CALLPUSH_ACK_SECRET_FILE", "required (or CALLPUSH_ACK_SECRET): the secret shared with the workers")
        }
        guard secret.utf8.count >= 32 else {
            throw DispatchConfigurationError("CALLPUSH_ACK_SECRET", "must be at least 32 bytes (it is \(secret.utf8.count))")
        }
        let podName = env["POD_NAME"].flatMap { $0.isEmpty ? nil : $0 }
        var configuration = DispatchConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: brokers, clientID: "callpush", properties: properties),
            apps: apps, apiKeys: keysFile.keys, ackSecret: Array(secret.utf8),
            instanceID: env["CALLPUSH_DISPATCH_ID"] ?? podName ?? ProcessInfo.processInfo.hostName)
        configuration.requestsTopic = env["CALLPUSH_TOPIC_REQUESTS"] ?? configuration.requestsTopic
        configuration.statusTopic = env["CALLPUSH_TOPIC_STATUS"] ?? configuration.statusTopic
        configuration.host = env["CALLPUSH_DISPATCH_HOST"] ?? configuration.host
        configuration.port = try reader.int("CALLPUSH_DISPATCH_PORT", default: configuration.port, in: 0...65_535)
        configuration.webhooks = keysFile.webhooks
        switch (env["CALLPUSH_DISPATCH_TLS_CERT_FILE"].flatMap { $0.isEmpty ? nil : $0 }, env["CALLPUSH_DISPATCH_TLS_KEY_FILE"].flatMap { $0.isEmpty ? nil : $0 }) {
        case (nil, nil): break
        case (let chain?, let key?):
            reader.auditSecretFile(key, key: "CALLPUSH_DISPATCH_TLS_KEY_FILE")
            var files = TLSFiles(certificateChain: chain, privateKey: key)
            files.reloadInterval = .seconds(try reader.int("CALLPUSH_DISPATCH_TLS_RELOAD_SECONDS", default: 30, in: 1...86_400))
            configuration.tls = files
        case (nil, _?): throw DispatchConfigurationError("CALLPUSH_DISPATCH_TLS_CERT_FILE", "required with CALLPUSH_DISPATCH_TLS_KEY_FILE")
        case (_?, nil): throw DispatchConfigurationError("CALLPUSH_DISPATCH_TLS_KEY_FILE", "required with CALLPUSH_DISPATCH_TLS_CERT_FILE")
        }
        configuration.metricsHost = env["CALLPUSH_DISPATCH_METRICS_HOST"] ?? configuration.metricsHost
        let metricsPort = try reader.int("CALLPUSH_DISPATCH_METRICS_PORT", default: 9090, in: -1...65_535)
        configuration.metricsPort = metricsPort < 0 ? nil : metricsPort
        var limits = DispatchLimits()
        limits.maxDevices = try reader.int("CALLPUSH_DISPATCH_MAX_DEVICES", default: limits.maxDevices, in: 1...100)
        let maxRing = try reader.int("CALLPUSH_DISPATCH_MAX_RING_TIMEOUT_SECONDS", default: 120, in: 1...600)
        limits.ringTimeoutSeconds = 1...maxRing
        limits.defaultRingTimeoutSeconds = try reader.int("CALLPUSH_DISPATCH_DEFAULT_RING_TIMEOUT_SECONDS", default: min(30, maxRing), in: 1...maxRing)
        // Up to the contract's 64 KiB document limit: a larger body could only ever fail decoding.
        limits.maxBodyBytes = try reader.int("CALLPUSH_DISPATCH_MAX_BODY_BYTES", default: limits.maxBodyBytes, in: 1_024...65_536)
        limits.ackMaxBodyBytes = try reader.int("CALLPUSH_DISPATCH_ACK_MAX_BODY_BYTES", default: limits.ackMaxBodyBytes, in: 512...65_536)
        configuration.limits = limits
        configuration.publishTimeout = .milliseconds(try reader.int("CALLPUSH_DISPATCH_PUBLISH_TIMEOUT_MS", default: 5_000, in: 100...60_000))
        configuration.retryAfterSeconds = try reader.int("CALLPUSH_DISPATCH_RETRY_AFTER_SECONDS", default: 1, in: 1...3_600)
        configuration.idempotencyWindow = .seconds(try reader.int("CALLPUSH_DISPATCH_IDEMPOTENCY_WINDOW_SECONDS", default: 600, in: 1...86_400))
        configuration.idempotencyBytes = try reader.int("CALLPUSH_DISPATCH_IDEMPOTENCY_MIB", default: configuration.idempotencyBytes >> 20, in: 1...16_384) << 20
        configuration.viewWindow = .seconds(try reader.int("CALLPUSH_DISPATCH_VIEW_WINDOW_SECONDS", default: 3_600, in: 60...604_800))
        configuration.viewBytes = try reader.int("CALLPUSH_DISPATCH_VIEW_MIB", default: configuration.viewBytes >> 20, in: 1...65_536) << 20
        configuration.eventStreamLimit = .seconds(try reader.int("CALLPUSH_DISPATCH_SSE_LIMIT_SECONDS", default: 600, in: 1...86_400))
        configuration.eventStreamsPerKey = try reader.int("CALLPUSH_DISPATCH_SSE_STREAMS_PER_KEY", default: configuration.eventStreamsPerKey, in: 1...100_000)
        configuration.eventStreams = try reader.int("CALLPUSH_DISPATCH_SSE_STREAMS", default: configuration.eventStreams, in: 1...100_000)
        configuration.eventStreamBufferBytes = try reader.int("CALLPUSH_DISPATCH_SSE_BUFFER_KIB", default: configuration.eventStreamBufferBytes >> 10,
                                                              in: 4...16_384) << 10
        configuration.ackGrace = .seconds(try reader.int("CALLPUSH_DISPATCH_ACK_GRACE_SECONDS", default: 300, in: 0...3_600))
        configuration.ackRatePerAddress = Double(try reader.int("CALLPUSH_DISPATCH_ACK_RATE_PER_ADDRESS", default: 50, in: 1...1_000_000))
        configuration.ringsPerDevicePerMinute = Double(try reader.int("CALLPUSH_DISPATCH_RINGS_PER_DEVICE_PER_MINUTE", default: 30, in: 1...100_000))
        configuration.ackRatePerCall = Double(try reader.int("CALLPUSH_DISPATCH_ACK_RATE_PER_CALL", default: 5, in: 1...10_000))
        configuration.ackBytes = try reader.int("CALLPUSH_DISPATCH_ACK_MIB", default: configuration.ackBytes >> 20, in: 1...4_096) << 20
        configuration.trustedProxyHops = try reader.int("CALLPUSH_DISPATCH_TRUSTED_PROXY_HOPS", default: 0, in: 0...10)
        configuration.maxConnections = try reader.int("CALLPUSH_DISPATCH_MAX_CONNECTIONS", default: configuration.maxConnections, in: 1...1_000_000)
        configuration.idleTimeout = .seconds(try reader.int("CALLPUSH_DISPATCH_IDLE_TIMEOUT_SECONDS", default: 30, in: 1...3_600))
        configuration.bodyTimeout = .seconds(try reader.int("CALLPUSH_DISPATCH_BODY_TIMEOUT_SECONDS", default: 10, in: 1...600))
        configuration.readinessProbeInterval = .milliseconds(try reader.int("CALLPUSH_DISPATCH_READINESS_PROBE_MS", default: 5_000, in: 100...600_000))
        if env["CALLPUSH_DISPATCH_WEBHOOK_URL"].map({ !$0.isEmpty }) == true {
            throw DispatchConfigurationError("CALLPUSH_DISPATCH_WEBHOOK_URL", "webhooks are per tenant now: set tenants[].webhook in CALLPUSH_DISPATCH_API_KEYS_FILE")
        }
        var webhooks = WebhookDelivery()
        webhooks.groupID = env["CALLPUSH_DISPATCH_WEBHOOK_GROUP"].flatMap { $0.isEmpty ? nil : $0 } ?? webhooks.groupID
        webhooks.queueBytes = try reader.int("CALLPUSH_DISPATCH_WEBHOOK_MIB", default: webhooks.queueBytes >> 20, in: 1...4_096) << 20
        webhooks.maxAttempts = try reader.int("CALLPUSH_DISPATCH_WEBHOOK_ATTEMPTS", default: webhooks.maxAttempts, in: 1...100)
        webhooks.concurrency = try reader.int("CALLPUSH_DISPATCH_WEBHOOK_CONCURRENCY", default: webhooks.concurrency, in: 1...1_000)
        webhooks.timeout = .milliseconds(try reader.int("CALLPUSH_DISPATCH_WEBHOOK_TIMEOUT_MS", default: 5_000, in: 100...120_000))
        webhooks.connectTimeout = .milliseconds(try reader.int("CALLPUSH_DISPATCH_WEBHOOK_CONNECT_TIMEOUT_MS", default: 2_000, in: 100...60_000))
        configuration.webhookDelivery = webhooks
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

/// The API keys file (`CALLPUSH_DISPATCH_API_KEYS_FILE`): the tenants, the apps each may ring,
/// their webhooks and their keys, stored hashed.
///
/// ```json
/// {"tenants": [{"name": "taxi", "apps": ["rider", "driver"],
///               "webhook": {"url": "https://hooks.taxi.example/callpush", "secret": "<at least 16 bytes>"},
///               "keys": [{"name": "taxi-backend", "sha256": "<64 hex digits: SHA-256 of the key>", "ratePerSecond": 200, "burst": 400}]}]}
/// ```
/// `apps` is required (`["*"]`: every app of the apps file); `webhook`, `ratePerSecond` (default
/// 100) and `burst` (default 2 × rate) are optional. Make a hash with `printf %s "$KEY" | sha256sum`.
/// Tenant names, key names and hashes must be unique.
public enum APIKeysFile {
    struct File: Decodable {
        var tenants: [TenantEntry]
    }

    struct TenantEntry: Decodable {
        var name: String
        var apps: [String]
        var webhook: WebhookEntry?
        var keys: [KeyEntry]
    }

    struct WebhookEntry: Decodable {
        var url: String
        var secret: String
    }

    struct KeyEntry: Decodable {
        var name: String
        var sha256: String
        var ratePerSecond: Double?
        var burst: Double?
    }

    /// What the file configures.
    public struct Contents: Sendable {
        public var keys: [APIKey]
        /// Webhook targets by tenant name.
        public var webhooks: [String: WebhookTarget]
    }

    static let setting = "CALLPUSH_DISPATCH_API_KEYS_FILE"

    /// Parses the file's content; `knownApps` are the apps file's app names (a tenant naming
    /// another app is a mistake worth stopping for).
    public static func parse(_ data: Data, knownApps: Set<String>) throws(DispatchConfigurationError) -> Contents {
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: data)
        } catch {
            throw DispatchConfigurationError(setting, "expected {\"tenants\": [{name, apps, webhook?, keys: [{name, sha256, ratePerSecond?, burst?}]}]} (docs/dispatch.md)")
        }
        var keys: [APIKey] = []
        var webhooks: [String: WebhookTarget] = [:]
        var tenantNames = Set<String>(), keyNames = Set<String>(), hashes = Set<[UInt8]>()
        for (index, tenant) in file.tenants.enumerated() {
            guard TenantName.problem(tenant.name) == nil else {
                throw DispatchConfigurationError("\(setting) tenants[\(index)].name", "1–64 of letters, digits, '.', '-', '_'")
            }
            guard tenantNames.insert(tenant.name).inserted else {
                throw DispatchConfigurationError("\(setting) \(tenant.name)", "tenant named twice")
            }
            let apps: Set<String>?
            if tenant.apps == ["*"] {
                apps = nil
            } else {
                guard !tenant.apps.isEmpty else { throw DispatchConfigurationError("\(setting) \(tenant.name).apps", "name at least one app, or [\"*\"] for all") }
                if let unknown = tenant.apps.first(where: { !knownApps.contains($0) }) {
                    throw DispatchConfigurationError("\(setting) \(tenant.name).apps", "\"\(unknown.prefix(64))\" is not an app of CALLPUSH_APPS_FILE")
                }
                apps = Set(tenant.apps)
            }
            if let webhook = tenant.webhook {
                webhooks[tenant.name] = try WebhookTarget.parse(url: webhook.url, secret: webhook.secret, key: "\(setting) \(tenant.name).webhook")
            }
            guard !tenant.keys.isEmpty else { throw DispatchConfigurationError("\(setting) \(tenant.name).keys", "no keys") }
            for entry in tenant.keys {
                guard !entry.name.isEmpty, entry.name.utf8.count <= 64,
                      entry.name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                    throw DispatchConfigurationError("\(setting) \(tenant.name).keys.name", "1–64 of letters, digits, '.', '-', '_'")
                }
                guard keyNames.insert(entry.name).inserted else {
                    throw DispatchConfigurationError("\(setting) \(entry.name)", "key named twice")
                }
                guard let hash = hexBytes(entry.sha256), hash.count == 32 else {
                    throw DispatchConfigurationError("\(setting) \(entry.name).sha256", "expected 64 hex digits (SHA-256 of the key)")
                }
                guard hashes.insert(hash).inserted else {
                    throw DispatchConfigurationError("\(setting) \(entry.name).sha256", "the same key hash appears twice")
                }
                let rate = entry.ratePerSecond ?? 100
                guard rate > 0, rate <= 1_000_000, (entry.burst ?? 1) >= 1 else {
                    throw DispatchConfigurationError("\(setting) \(entry.name).ratePerSecond", "rate must be > 0 and burst ≥ 1")
                }
                keys.append(APIKey(name: entry.name, sha256: hash, ratePerSecond: rate, burst: entry.burst, tenant: tenant.name, apps: apps))
            }
        }
        guard !keys.isEmpty else { throw DispatchConfigurationError(setting, "no API keys configured") }
        return Contents(keys: keys, webhooks: webhooks)
    }

    static func load(path: String, knownApps: Set<String>, reader: EnvironmentReader) throws(DispatchConfigurationError) -> Contents {
        reader.auditSecretFile(path, key: setting)
        return try parse(Data(try reader.file(path, key: setting).utf8), knownApps: knownApps)
    }

    static func hexBytes(_ text: String) -> [UInt8]? {
        let chars = Array(text.lowercased().utf8)
        guard chars.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: chars.count, by: 2) {
            guard let high = Hex.value(of: chars[index]), let low = Hex.value(of: chars[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }
}
