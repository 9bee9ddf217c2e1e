import Locking

/// Configuration of a ``KafkaProducer``.
///
/// Defaults are those callpush needs for "acknowledged means stored": idempotence on
/// (`enable.idempotence=true`, which implies `acks=all`), bounded delivery time and a
/// bounded local queue. Anything in ``kafka``'s `properties` overrides these defaults.
public struct KafkaProducerConfiguration: Sendable, Hashable, CustomStringConvertible {
    /// Brokers, client id and any librdkafka property (e.g. security settings).
    public var kafka: KafkaConfiguration
    /// `message.timeout.ms`: how long librdkafka may try to deliver a message before the
    /// delivery report fails with `_MSG_TIMED_OUT`. Default 30 s.
    public var deliveryTimeout: Duration
    /// How long a `send` waits for room when the local queue is full (back-pressure) before
    /// failing with ``KafkaError/Code/timeout``. Default 30 s.
    public var queueFullTimeout: Duration
    /// `queue.buffering.max.messages`: the bound of the local queue. Default 100,000.
    public var maxQueuedMessages: Int
    /// `linger.ms`: how long to wait to fill batches. Default 5 ms.
    public var linger: Duration
    /// How long shutdown waits for outstanding messages to be acknowledged (flush). Default 10 s.
    public var flushTimeout: Duration
    /// How long shutdown waits for `rd_kafka_destroy` before giving up on it (logged). Default 10 s.
    public var destroyTimeout: Duration
    /// Idempotent producer (`enable.idempotence`). Default `true`; turning it off risks duplicates.
    public var idempotent: Bool
    /// After a fatal error the producer replaces its librdkafka client at once; if the new one
    /// fails fatally too within ``maxReplacementBackoff``, the next replacement waits this long
    /// after the previous one, doubling each time up to ``maxReplacementBackoff``. Default 1 s.
    public var replacementBackoff: Duration = .seconds(1)
    /// The longest wait between two replacements; a client that lived longer than this resets
    /// the back-off. Default 30 s.
    public var maxReplacementBackoff: Duration = .seconds(30)

    /// Creates a producer configuration with callpush's defaults.
    public init(
        kafka: KafkaConfiguration,
        deliveryTimeout: Duration = .seconds(30),
        queueFullTimeout: Duration = .seconds(30),
        maxQueuedMessages: Int = 100_000,
        linger: Duration = .milliseconds(5),
        flushTimeout: Duration = .seconds(10),
        destroyTimeout: Duration = .seconds(10),
        idempotent: Bool = true
    ) {
        self.kafka = kafka
        self.deliveryTimeout = deliveryTimeout
        self.queueFullTimeout = queueFullTimeout
        self.maxQueuedMessages = maxQueuedMessages
        self.linger = linger
        self.flushTimeout = flushTimeout
        self.destroyTimeout = destroyTimeout
        self.idempotent = idempotent
    }

    /// Creates a producer configuration for the given brokers.
    public init(bootstrapServers: [String]) {
        self.init(kafka: KafkaConfiguration(bootstrapServers: bootstrapServers))
    }

    /// The librdkafka properties: defaults, then the user's overrides.
    var librdkafkaProperties: [String: String] {
        var properties: [String: String] = [
            "enable.idempotence": idempotent ? "true" : "false",
            "acks": "all",
            "message.timeout.ms": String(deliveryTimeout.milliseconds),
            "queue.buffering.max.messages": String(maxQueuedMessages),
            "linger.ms": String(linger.milliseconds),
        ]
        properties.merge(KafkaPropertyScope.forProducer(kafka.rawProperties)) { _, user in user }
        return properties
    }

    public var description: String {
        "KafkaProducerConfiguration(\(KafkaConfiguration.redactedDescription(of: librdkafkaProperties)))"
    }
}

extension Duration {
    /// Whole milliseconds (rounded down, at least 0).
    var milliseconds: Int {
        max(0, Int(inWholeMilliseconds))
    }
}
