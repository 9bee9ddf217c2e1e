import APNs
import CallContract
import CallpushCore
import FCM
import Foundation
import Kafka

/// Reads a push-worker's configuration from the environment (the container way), validating
/// every value and naming the variable at fault. Secrets come from files (`…_FILE`) or the
/// environment, never from the command line.
///
/// | variable | default | meaning |
/// |---|---|---|
/// | `CALLPUSH_KAFKA_BOOTSTRAP` | required | comma-separated brokers |
/// | `CALLPUSH_KAFKA_<PROPERTY>` | — | any librdkafka property, `_` → `.` (e.g. `CALLPUSH_KAFKA_SECURITY_PROTOCOL=SASL_SSL`); values may be `file:/path` or `env:NAME` |
/// | `CALLPUSH_APPS_FILE` | required | JSON file of apps and their APNs credentials and FCM service accounts (see `AppsFile`) |
/// | `CALLPUSH_ACK_SECRET_FILE` / `CALLPUSH_ACK_SECRET` | required | ≥ 32-byte secret shared with dispatch for ack tokens |
/// | `CALLPUSH_APNS_PRODUCTION_ENDPOINT` | `api.push.apple.com:443` | `host:port` |
/// | `CALLPUSH_APNS_SANDBOX_ENDPOINT` | `api.sandbox.push.apple.com:443` | `host:port` |
/// | `CALLPUSH_APNS_CA_FILE` | — | extra CA to trust (e.g. the simulator's); verification stays on |
/// | `CALLPUSH_APNS_CONNECTIONS` | 2 | connections per (credential, environment) |
/// | `CALLPUSH_APNS_TIMEOUT_MS` | 5000 | longest wait for one APNs (or FCM) answer |
/// | `CALLPUSH_FCM_ENDPOINT` | `https://fcm.googleapis.com` | FCM HTTP v1 base URL |
/// | `CALLPUSH_FCM_CA_FILE` | — | extra CA to trust for FCM and its token endpoint (e.g. the simulator's); verification stays on |
/// | `CALLPUSH_FCM_CONNECTIONS` | 2 | HTTP/2 connections to FCM |
/// | `CALLPUSH_PUSH_EVENT_LOOPS` | 1 | NIO event loops (threads) the APNs and FCM connections run on, and the worker's deliveries with them |
/// | `CALLPUSH_GROUP_ID` | `callpush-push-worker` | consumer group |
/// | `CALLPUSH_GROUP_INSTANCE_ID` | — | static membership: only with identities that survive a replacement (StatefulSet ordinal) |
/// | `CALLPUSH_WORKER_ID` | `POD_NAME` or host name | written into statuses |
/// | `CALLPUSH_TOPIC_REQUESTS` / `_STATUS` / `_DLQ` | `voip.call-requests` / `voip.call-status` / `voip.call-requests.dlq` | topics |
/// | `CALLPUSH_MAX_IN_FLIGHT` | 2000 | deliveries in flight; consumption pauses when full |
/// | `CALLPUSH_DRAIN_TIMEOUT_MS` | 5000 | drain bound on revoke and SIGTERM |
/// | `CALLPUSH_DEDUPE_WINDOW_SECONDS` | 600 | status history read on assignment |
/// | `CALLPUSH_DEDUPE_CAPACITY` | 1000000 | dedupe entries across all partitions of the worker (~100 bytes each) |
/// | `CALLPUSH_CANCEL_CAPACITY` | 200000 | cancelled calls remembered |
/// | `CALLPUSH_STALL_SECONDS` | 300 | a delivery unfinished this long makes the worker not ready |
/// | `CALLPUSH_UNHEALTHY_AFTER_SECONDS` | 600 | failing writes or a stall this long make it not live |
/// | `CALLPUSH_HTTP_HOST` / `CALLPUSH_HTTP_PORT` | `0.0.0.0` / 9090 | `/metrics`, `/healthz`, `/readyz` |
public struct WorkerEnvironment: Sendable {
    public var worker: PushWorkerConfiguration
    public var apns: APNSClientConfiguration
    /// Apps with APNs credentials.
    public var apps: [APNSAppID: APNSApp]
    public var fcm = FCMClientConfiguration()
    /// Apps with an FCM service account.
    public var fcmApps: [FCMAppID: FCMApp] = [:]
    public var ackSecret: [UInt8]
    /// Event loops of the group the APNs and FCM clients share (`PushWorkerApp`).
    public var pushEventLoops = 1
    public var httpHost = "0.0.0.0"
    public var httpPort = 9090
    /// Problems worth a warning at start (e.g. a key file other users can read); never secret values.
    public var warnings: [String] = []

    public static func load(_ env: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> WorkerEnvironment {
        let reader = EnvironmentReader(env: env)
        let (brokers, properties) = try reader.kafka()
        let podName = env["POD_NAME"].flatMap { $0.isEmpty ? nil : $0 }
        var worker = PushWorkerConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: brokers, clientID: "callpush", properties: properties),
            workerID: env["CALLPUSH_WORKER_ID"] ?? podName ?? ProcessInfo.processInfo.hostName)
        worker.groupID = env["CALLPUSH_GROUP_ID"] ?? worker.groupID
        // Not the pod name: a Deployment's pods get new names on every replacement, and a static member
        // that does not come back holds its partitions until its session times out (librdkafka 2.0.2
        // sends no LeaveGroup for static members).
        worker.groupInstanceID = env["CALLPUSH_GROUP_INSTANCE_ID"].flatMap { $0.isEmpty ? nil : $0 }
        worker.requestsTopic = env["CALLPUSH_TOPIC_REQUESTS"] ?? worker.requestsTopic
        worker.statusTopic = env["CALLPUSH_TOPIC_STATUS"] ?? worker.statusTopic
        worker.deadLetterTopic = env["CALLPUSH_TOPIC_DLQ"] ?? worker.deadLetterTopic
        worker.maxInFlight = try reader.int("CALLPUSH_MAX_IN_FLIGHT", default: worker.maxInFlight, in: 1...100_000)
        worker.drainTimeout = .milliseconds(try reader.int("CALLPUSH_DRAIN_TIMEOUT_MS", default: 5_000, in: 0...600_000))
        worker.dedupeWindow = .seconds(try reader.int("CALLPUSH_DEDUPE_WINDOW_SECONDS", default: 600, in: 60...86_400))
        worker.dedupeCapacity = try reader.int("CALLPUSH_DEDUPE_CAPACITY", default: worker.dedupeCapacity, in: 10...10_000_000)
        worker.cancelCapacity = try reader.int("CALLPUSH_CANCEL_CAPACITY", default: worker.cancelCapacity, in: 100...10_000_000)
        worker.health.stallBound = .seconds(try reader.int("CALLPUSH_STALL_SECONDS", default: 300, in: 10...86_400))
        worker.health.unhealthyAfter = .seconds(try reader.int("CALLPUSH_UNHEALTHY_AFTER_SECONDS", default: 600, in: 10...86_400))
        let timeoutMs = try reader.int("CALLPUSH_APNS_TIMEOUT_MS", default: 5_000, in: 100...60_000)
        worker.attemptTimeout = .milliseconds(timeoutMs)

        var apns = APNSClientConfiguration()
        apns.requestTimeout = .milliseconds(timeoutMs)
        apns.connectionsPerPool = try reader.int("CALLPUSH_APNS_CONNECTIONS", default: apns.connectionsPerPool, in: 1...64)
        if let value = env["CALLPUSH_APNS_PRODUCTION_ENDPOINT"] { apns.productionEndpoint = try endpoint(value, key: "CALLPUSH_APNS_PRODUCTION_ENDPOINT") }
        if let value = env["CALLPUSH_APNS_SANDBOX_ENDPOINT"] { apns.sandboxEndpoint = try endpoint(value, key: "CALLPUSH_APNS_SANDBOX_ENDPOINT") }
        if let path = env["CALLPUSH_APNS_CA_FILE"] { apns.additionalTrustedCAPEM = [try reader.file(path, key: "CALLPUSH_APNS_CA_FILE")] }

        var fcm = FCMClientConfiguration()
        fcm.requestTimeout = .milliseconds(timeoutMs)
        fcm.connections = try reader.int("CALLPUSH_FCM_CONNECTIONS", default: fcm.connections, in: 1...64)
        if let value = env["CALLPUSH_FCM_ENDPOINT"] {
            guard let url = URL(string: value), url.scheme == "https", url.host != nil, url.path.isEmpty || url.path == "/" else {
                throw ConfigurationError("CALLPUSH_FCM_ENDPOINT", "expected an https URL without a path (https://host[:port])")
            }
            fcm.endpoint = value.hasSuffix("/") ? String(value.dropLast()) : value
        }
        if let path = env["CALLPUSH_FCM_CA_FILE"] { fcm.additionalTrustedCAPEM = [try reader.file(path, key: "CALLPUSH_FCM_CA_FILE")] }

        let appsPath = try reader.required("CALLPUSH_APPS_FILE")
        let apps = try AppsFile.load(path: appsPath, reader: reader)
        guard let secret = try reader.secret("CALLPUSH_ACK_SECRET") else {
            throw ConfigurationError("CALLPUSH_ACK_SECRET_FILE", "required (or CALLPUSH_ACK_SECRET): the secret shared with dispatch")
        }
        guard secret.utf8.count >= 32 else {
            throw ConfigurationError("CALLPUSH_ACK_SECRET", "must be at least 32 bytes (it is \(secret.utf8.count))")
        }
        var loaded = WorkerEnvironment(worker: worker, apns: apns, apps: apps.apns, ackSecret: Array(secret.utf8))
        loaded.fcm = fcm
        loaded.fcmApps = apps.fcm
        loaded.warnings = reader.warnings
        loaded.pushEventLoops = try reader.int("CALLPUSH_PUSH_EVENT_LOOPS", default: loaded.pushEventLoops, in: 1...64)
        loaded.httpHost = env["CALLPUSH_HTTP_HOST"] ?? loaded.httpHost
        loaded.httpPort = try reader.int("CALLPUSH_HTTP_PORT", default: loaded.httpPort, in: 0...65_535)
        return loaded
    }

    static func endpoint(_ text: String, key: String) throws(ConfigurationError) -> APNSEndpoint {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let port = Int(parts[1]), (1...65_535).contains(port), !parts[0].isEmpty else {
            throw ConfigurationError(key, "expected host:port")
        }
        return APNSEndpoint(host: String(parts[0]), port: port)
    }
}
