import ArgumentParser
import CallContract
import Foundation
import Kafka

/// The Kafka flags every Kafka command shares. Each has an environment fallback with the
/// services' names, so one environment configures the worker, dispatch and the CLI.
struct KafkaOptions: ParsableArguments, Sendable {
    @Option(help: ArgumentHelp("Kafka brokers, host:port[,host:port…] (env CALLPUSH_KAFKA_BOOTSTRAP).", valueName: "brokers"))
    var bootstrap: String?

    @Option(name: .customLong("kafka-property"),
            help: ArgumentHelp("""
                A librdkafka property key=value, repeatable (env CALLPUSH_KAFKA_<PROPERTY>, '_' for '.'). \
                Secret values (passwords, keys) only as file:PATH or env:NAME.
                """, valueName: "key=value"))
    var kafkaProperties: [String] = []

    @Option(help: ArgumentHelp("Requests topic (env CALLPUSH_TOPIC_REQUESTS).", valueName: "topic"))
    var topicRequests: String?

    @Option(help: ArgumentHelp("Status topic (env CALLPUSH_TOPIC_STATUS).", valueName: "topic"))
    var topicStatus: String?

    @Option(help: ArgumentHelp("Dead-letter topic (env CALLPUSH_TOPIC_DLQ).", valueName: "topic"))
    var topicDlq: String?

    @Option(help: "How long to wait for the Kafka cluster to answer.")
    var connectTimeout = DurationArgument(.seconds(10))

    /// Checks what can be checked without the environment (it is read at run time).
    func validate() throws {
        for property in kafkaProperties {
            _ = try Self.parseProperty(property)
        }
        for (flag, topic) in [("--topic-requests", topicRequests), ("--topic-status", topicStatus), ("--topic-dlq", topicDlq)] {
            if let topic, let problem = Self.topicProblem(topic) { throw ValidationError("\(flag): \(problem)") }
        }
        guard connectTimeout.duration >= .milliseconds(100), connectTimeout.duration <= .seconds(600) else {
            throw ValidationError("--connect-timeout must be between 100ms and 10m")
        }
    }

    /// `key=value` → (key, value); refuses a secret given in clear on the command line.
    static func parseProperty(_ text: String) throws(ValidationError) -> (String, String) {
        guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
            throw ValidationError("--kafka-property expects key=value, got '\(text.prefix(40))'")
        }
        let key = String(text[..<equals]).trimmingCharacters(in: .whitespaces)
        let value = String(text[text.index(after: equals)...])
        if KafkaConfiguration.isSecret(key: key), !value.hasPrefix("file:"), !value.hasPrefix("env:") {
            throw ValidationError("--kafka-property \(key): secrets are not accepted on the command line; use \(key)=file:PATH or \(key)=env:NAME")
        }
        return (key, value)
    }

    static func topicProblem(_ name: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= 249 else { return "a topic name has 1 to 249 characters" }
        guard name != ".", name != "..",
              name.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0)) })
        else { return "'\(name.prefix(60))' is not a valid topic name (letters, digits, '.', '_', '-')" }
        return nil
    }

    /// The Kafka configuration and topic names from the flags, then the environment.
    func resolve(environment: [String: String], clientID: String) throws(CLIError) -> ResolvedKafka {
        guard let bootstrap = (bootstrap ?? environment["CALLPUSH_KAFKA_BOOTSTRAP"]).flatMap({ $0.isEmpty ? nil : $0 }) else {
            throw CLIError.usage("no Kafka cluster given: use --bootstrap host:port or set CALLPUSH_KAFKA_BOOTSTRAP")
        }
        let brokers = bootstrap.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !brokers.isEmpty, brokers.allSatisfy({ Self.isBroker($0) }) else {
            throw CLIError.usage("--bootstrap / CALLPUSH_KAFKA_BOOTSTRAP: expected host:port[,host:port…], got '\(bootstrap.prefix(80))'")
        }
        var properties: [String: String] = [:]
        for (key, value) in environment where key.hasPrefix("CALLPUSH_KAFKA_") && key != "CALLPUSH_KAFKA_BOOTSTRAP" {
            properties[key.dropFirst("CALLPUSH_KAFKA_".count).lowercased().replacingOccurrences(of: "_", with: ".")] = value
        }
        for property in kafkaProperties {
            do {
                let (key, value) = try Self.parseProperty(property)
                properties[key] = value
            } catch {
                throw CLIError.usage(error.message)
            }
        }
        var topics = TopicNames()
        topics.requests = try Self.topic(topicRequests, environment["CALLPUSH_TOPIC_REQUESTS"], Topics.requests, "CALLPUSH_TOPIC_REQUESTS")
        topics.status = try Self.topic(topicStatus, environment["CALLPUSH_TOPIC_STATUS"], Topics.status, "CALLPUSH_TOPIC_STATUS")
        topics.deadLetter = try Self.topic(topicDlq, environment["CALLPUSH_TOPIC_DLQ"], Topics.deadLetter, "CALLPUSH_TOPIC_DLQ")
        return ResolvedKafka(
            configuration: KafkaConfiguration(bootstrapServers: brokers, clientID: clientID, properties: properties),
            topics: topics, connectTimeout: connectTimeout.duration)
    }

    private static func topic(_ flag: String?, _ env: String?, _ fallback: String, _ key: String) throws(CLIError) -> String {
        if let flag { return flag }
        guard let env, !env.isEmpty else { return fallback }
        if let problem = topicProblem(env) { throw CLIError.usage("\(key): \(problem)") }
        return env
    }

    private static func isBroker(_ text: String) -> Bool {
        guard let colon = text.lastIndex(of: ":"), colon != text.startIndex,
              let port = Int(text[text.index(after: colon)...]), (1...65_535).contains(port) else { return false }
        return true
    }
}

/// The three topic names a command works with.
struct TopicNames: Sendable, Hashable {
    var requests = Topics.requests
    var status = Topics.status
    var deadLetter = Topics.deadLetter
}
