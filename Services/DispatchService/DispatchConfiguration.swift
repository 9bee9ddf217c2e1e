import CallContract
import Foundation
import Kafka

/// Everything a dispatch instance needs, as a value (no environment access: see
/// ``DispatchEnvironment`` for the environment reader, and `callpush dev` for an embedded use).
///
/// The byte budgets' defaults fit the shipped pod limit (512 MiB, deploy/kubernetes/dispatch.yaml)
/// with room for the runtime and librdkafka: view 96 MiB + idempotency 32 MiB + acks 8 MiB + SSE
/// 1,000 streams × 64 KiB + webhooks 32 MiB + three rate-limit tables (client address, call,
/// device) of at most 100,000 entries each (about 15 MiB each) ≈ 275 MiB.
public struct DispatchConfiguration: Sendable, CustomStringConvertible {
    /// Brokers, client id and any librdkafka property.
    public var kafka: KafkaConfiguration
    /// Where `ring` / `cancel` events go. Default `voip.call-requests`.
    public var requestsTopic = Topics.requests
    /// Where statuses are read and device reports written. Default `voip.call-status`.
    public var statusTopic = Topics.status
    /// Listen address of the HTTP API. Port 0 picks a free port (see ``DispatchApp/port()``).
    public var host = "0.0.0.0"
    /// Default 8080.
    public var port = 8080
    /// Serve HTTPS on `port` with these certificate and key files (reloaded when they change);
    /// nil: plain HTTP, behind a TLS-terminating proxy.
    public var tls: TLSFiles?
    /// Listen address of `/metrics` (and `/healthz`, `/readyz`); port 0 picks a free port, nil
    /// serves no operations listener. Default none here; the environment's default is 9090
    /// (``DispatchEnvironment``), so an embedding never takes a fixed port by surprise.
    public var metricsHost = "0.0.0.0"
    public var metricsPort: Int?
    /// App names a ring may name (the worker's apps file keys).
    public var apps: Set<String>
    /// Backend API keys (each of a tenant); an empty list refuses every backend request.
    public var apiKeys: [APIKey]
    /// Status webhooks by tenant name.
    public var webhooks: [String: WebhookTarget] = [:]
    /// How status webhooks are delivered (the same for every tenant).
    public var webhookDelivery = WebhookDelivery()
    /// The ack-token secret shared with the workers (≥ 32 bytes).
    public var ackSecret: [UInt8]
    /// Written into the `worker` field of the `reported` / `suppressed` statuses dispatch publishes.
    public var instanceID: String
    /// Request limits.
    public var limits = DispatchLimits()
    /// How long `POST /v1/calls` (and DELETE, ack) waits for Kafka's acknowledgement before
    /// answering 503. librdkafka's `message.timeout.ms` is set to this bound too, so an event that
    /// was not acknowledged in time is not delivered long after the client was told 503. Default 5 s.
    public var publishTimeout: Duration = .seconds(5)
    /// `Retry-After` seconds on 503. Default 1.
    public var retryAfterSeconds = 1
    /// How long an answered `callId` is remembered for idempotent repeats. Default 10 min.
    public var idempotencyWindow: Duration = .seconds(600)
    /// Most bytes of remembered answers. Default 32 MiB (≈ 2.5 KB per 10-device call).
    public var idempotencyBytes = 32 << 20
    /// How far back the status view reads at start and how long a call stays in it after its
    /// last change. Default 1 h.
    public var viewWindow: Duration = .seconds(3_600)
    /// Most bytes of calls in the status view (estimated per call). Default 96 MiB.
    public var viewBytes = 96 << 20
    /// Longest life of one SSE stream. Default 10 min.
    public var eventStreamLimit: Duration = .seconds(600)
    /// Open SSE streams per API key, and in all. Defaults 100 and 1,000.
    public var eventStreamsPerKey = 100
    public var eventStreams = 1_000
    /// Bytes of status frames one SSE stream may hold for a slow reader. Default 64 KiB.
    public var eventStreamBufferBytes = 64 << 10
    /// Ack tokens are accepted until the ring deadline plus this grace. Default 5 min.
    public var ackGrace: Duration = .seconds(300)
    /// Rings per minute of one device (app and token), whatever the key, with a burst of as many.
    /// Default 30.
    public var ringsPerDevicePerMinute: Double = 30
    /// Acks per second (burst 2×) per client address and per call. Defaults 50 and 5.
    public var ackRatePerAddress: Double = 50
    public var ackRatePerCall: Double = 5
    /// Most bytes of remembered acks (each answered once per call, device, replay, outcome). Default 8 MiB.
    public var ackBytes = 8 << 20
    /// Proxies in front of dispatch whose `X-Forwarded-For` entry is trusted for the client
    /// address (0: the peer's address). Default 0.
    public var trustedProxyHops = 0
    /// Connections open at once (beyond it new ones wait in the backlog). Default 2,048.
    public var maxConnections = 2_048
    /// A connection that sends nothing (no request head, or between requests) for this long is
    /// closed. Default 30 s.
    public var idleTimeout: Duration = .seconds(30)
    /// A request body must arrive within this bound (else 408 and the connection closes). Default 10 s.
    public var bodyTimeout: Duration = .seconds(10)
    /// Problems worth a warning at start (e.g. a secret file other users can read); never secret values.
    public var warnings: [String] = []
    /// How often `/readyz` checks that Kafka answers (a bounded metadata request). Default 5 s.
    public var readinessProbeInterval: Duration = .seconds(5)
    /// A configuration with the defaults documented on each property.
    public init(kafka: KafkaConfiguration, apps: Set<String>, apiKeys: [APIKey], ackSecret: [UInt8], instanceID: String = "dispatch") {
        self.kafka = kafka
        self.apps = apps
        self.apiKeys = apiKeys
        self.ackSecret = ackSecret
        self.instanceID = instanceID
    }

    /// Secrets (ack secret, key hashes, webhook secrets) are not shown.
    public var description: String {
        "DispatchConfiguration(port: \(port), tls: \(tls != nil), apps: \(apps.sorted()), keys: \(apiKeys.map(\.description)), "
            + "webhooks: \(webhooks.keys.sorted()), ackSecret: redacted)"
    }
}

/// The certificate chain and private key dispatch serves HTTPS with (PEM files).
public struct TLSFiles: Sendable, Hashable {
    public var certificateChain: String
    public var privateKey: String
    /// How often the files are checked for a change. Default 30 s.
    public var reloadInterval: Duration = .seconds(30)

    public init(certificateChain: String, privateKey: String) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
    }
}

/// How status webhooks are delivered (targets are per tenant: ``DispatchConfiguration/webhooks``).
public struct WebhookDelivery: Sendable, Hashable {
    /// The consumer group whose committed position on the status topic says what was delivered.
    /// Default `callpush-dispatch-webhooks`.
    public var groupID = "callpush-dispatch-webhooks"
    /// Most bytes of statuses read and not yet delivered; beyond it reading waits. Default 32 MiB.
    public var queueBytes = 32 << 20
    /// Attempts per status (exponential backoff 200 ms … 10 s). Default 5.
    public var maxAttempts = 5
    /// Bound on connecting, and on one whole POST. Defaults 2 s and 5 s.
    public var connectTimeout: Duration = .seconds(2)
    public var timeout: Duration = .seconds(5)
    /// Calls delivered in parallel (each call's statuses in order). Default 16.
    public var concurrency = 16
    /// The group's session timeout (how soon a dead instance's partitions move). Default 10 s.
    public var sessionTimeout: Duration = .seconds(10)

    public init() {}
}
