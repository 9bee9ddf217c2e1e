import CRdKafka
import Foundation
import Testing

@testable import Kafka

@Suite("Configuration")
struct ConfigurationTests {
    @Test("a rejected property names the key in the error")
    func badPropertyNamesKey() throws {
        var configuration = KafkaProducerConfiguration(bootstrapServers: ["127.0.0.1:1"])
        configuration.kafka.properties["no.such.property"] = "1"
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(configuration: configuration, logger: TestSupport.logger)
        }
        #expect(error?.code == .configuration)
        #expect(error?.message.contains("no.such.property") == true)

        var invalidValue = KafkaConsumerConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: ["127.0.0.1:1"]),
            mode: .group(id: "g", topics: ["t"])
        )
        invalidValue.kafka.properties["session.timeout.ms"] = "not-a-number"
        let valueError = #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(configuration: invalidValue, logger: TestSupport.logger)
        }
        #expect(valueError?.message.contains("session.timeout.ms") == true)
    }

    @Test("secrets come from files and environment variables and are redacted in descriptions")
    func secretsLoadedAndRedacted() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(TestSupport.unique("secret")).path
        try "file-secret-123\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }

        #expect(try KafkaConfiguration.resolve(key: "sasl.password", value: "file:\(path)") == "file-secret-123")
        #expect(try KafkaConfiguration.resolve(key: "sasl.password", value: "env:KAFKA_PW", environment: ["KAFKA_PW": "env-secret-456"]) == "env-secret-456")
        #expect(try KafkaConfiguration.resolve(key: "x", value: "literal:env:NOT_A_REFERENCE") == "env:NOT_A_REFERENCE")
        #expect(try KafkaConfiguration.resolve(key: "x", value: "plain") == "plain")

        let missing = #expect(throws: KafkaError.self) {
            try KafkaConfiguration.resolve(key: "ssl.key.password", value: "env:CALLPUSH_SURELY_UNSET_VAR", environment: [:])
        }
        #expect(missing?.message.contains("ssl.key.password") == true)
        let missingFile = #expect(throws: KafkaError.self) {
            try KafkaConfiguration.resolve(key: "sasl.password", value: "file:/nonexistent/secret")
        }
        #expect(missingFile?.code == .configuration)

        // Loaded into librdkafka: a producer is created with the file-based secret.
        var configuration = KafkaProducerConfiguration(bootstrapServers: ["127.0.0.1:1"])
        configuration.kafka.properties = [
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "callpush",
            "sasl.password": "file:\(path)",
            "ssl.key.password": "hunter2-literal",
            "sasl.oauthbearer.client.secret": "oauth-secret-789",
        ]
        let description = "\(configuration) \(configuration.kafka)"
        #expect(!description.contains("file-secret-123"))
        #expect(!description.contains("hunter2-literal"))
        #expect(!description.contains("oauth-secret-789"))
        #expect(description.contains("sasl.password=<redacted>"))
        #expect(description.contains("sasl.username=callpush"))
        #expect(description.contains("enable.idempotence=true"))
        let client = try RDKafkaClient.create(
            type: RD_KAFKA_PRODUCER,
            properties: [
                "sasl.password": "file:\(path)", "sasl.username": "callpush", "sasl.mechanism": "PLAIN",
                "security.protocol": "SASL_PLAINTEXT",
            ],
            logger: TestSupport.logger,
            delegate: nil
        )
        #expect(client.configValue("sasl.password") == "file-secret-123")
        // The fetch wake-up goes through rd_kafka_sasl_set_credentials: it must hand back exactly
        // the resolved credentials, or a wake-up would change how the client authenticates.
        client.wakeBrokerThreads()
        #expect(client.configValue("sasl.password") == "file-secret-123")
        #expect(client.configValue("sasl.username") == "callpush")
        await client.destroy(deadline: .seconds(5), name: "test")
    }

    @Test("defaults: idempotent producer, at-least-once consumer with range assignor")
    func defaults() {
        let producer = KafkaProducerConfiguration(bootstrapServers: ["b:9092"]).librdkafkaProperties
        #expect(producer["enable.idempotence"] == "true")
        #expect(producer["acks"] == "all")
        let consumer = KafkaConsumerConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: ["b:9092"]),
            mode: .group(id: "workers", topics: ["voip.call-requests"]),
            groupInstanceID: "pod-1"
        ).librdkafkaProperties
        #expect(consumer["enable.auto.offset.store"] == "false")
        #expect(consumer["enable.auto.commit"] == "true")
        #expect(consumer["partition.assignment.strategy"] == "range")
        #expect(consumer["group.instance.id"] == "pod-1")
        #expect(consumer["group.id"] == "workers")
        // Stored offsets are committed every second (librdkafka's default is 5 s): a member that
        // cannot commit on revoke hands that much less work over again.
        #expect(consumer["auto.commit.interval.ms"] == "1000")
        let slower = KafkaConsumerConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: ["b:9092"], properties: ["auto.commit.interval.ms": "5000"]),
            mode: .group(id: "workers", topics: ["voip.call-requests"])
        ).librdkafkaProperties
        #expect(slower["auto.commit.interval.ms"] == "5000", "an operator's own interval wins")
    }

    @Test("shared properties reach only the kind of client that understands them (no CONFWARN noise)")
    func propertiesAreScopedToTheClientKind() {
        let shared = KafkaConfiguration(bootstrapServers: ["b:9092"], properties: [
            "fetch.wait.max.ms": "10", "linger.ms": "2", "security.protocol": "SASL_SSL", "acks": "1",
        ])
        let producer = KafkaProducerConfiguration(kafka: shared).librdkafkaProperties
        #expect(producer["fetch.wait.max.ms"] == nil)
        #expect(producer["linger.ms"] == "2" && producer["acks"] == "1", "producer settings still override the defaults")
        #expect(producer["security.protocol"] == "SASL_SSL")
        let consumer = KafkaConsumerConfiguration(kafka: shared, mode: .manual).librdkafkaProperties
        #expect(consumer["fetch.wait.max.ms"] == "10")
        #expect(consumer["linger.ms"] == nil && consumer["acks"] == nil)
        #expect(consumer["security.protocol"] == "SASL_SSL")
    }
}
