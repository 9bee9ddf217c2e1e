import CallContract
import Foundation
import Kafka

/// Everything a dispatch instance needs, as a value (no environment access: see
/// ``DispatchEnvironment`` for the environment reader, and `callpush dev` for an embedded use).
public struct DispatchConfiguration: Sendable {
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
    /// App names a ring may name (the worker's apps file keys).
    public var apps: Set<String>
    /// Backend API keys; an empty list refuses every backend request.
    public var apiKeys: [APIKey]
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
    /// Most remembered `callId`s (oldest forgotten first). Default 100,000.
    public var idempotencyCapacity = 100_000
    /// How far back the status view reads at start and how long a call stays in it after its
    /// last change. Default 1 h.
    public var viewWindow: Duration = .seconds(3_600)
    /// Most calls in the status view (oldest forgotten first). Default 100,000.
    public var viewCapacity = 100_000
    /// Longest life of one SSE stream. Default 10 min.
    public var eventStreamLimit: Duration = .seconds(600)
    /// Optional status webhooks.
    public var webhook: WebhookConfiguration?
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
}

/// Where and how status webhooks are delivered.
public struct WebhookConfiguration: Sendable, Hashable {
    /// `http://host[:port]/path` (plain HTTP/1.1; put TLS in front with a sidecar or proxy).
    public var url: URL
    /// HMAC-SHA256 key for `X-Callpush-Signature`.
    public var secret: [UInt8]
    /// Most statuses waiting for delivery; beyond it new ones are dropped (counted). Default 10,000.
    public var queueCapacity = 10_000
    /// Attempts per status (exponential backoff 200 ms … 10 s). Default 5.
    public var maxAttempts = 5
    /// Bound on one POST. Default 5 s.
    public var timeout: Duration = .seconds(5)

    /// Webhooks to `url`, signed with `secret`.
    public init(url: URL, secret: [UInt8]) {
        self.url = url
        self.secret = secret
    }
}
