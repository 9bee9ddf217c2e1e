import ArgumentParser
import Foundation
import Testing
@testable import CallpushCLI

/// Every command refuses bad flags with one clear message and a non-zero exit status.
@Suite struct CommandArguments {
    static let uuid = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"
    static let token = String(repeating: "ab", count: 32)

    @Test(arguments: [
        ["replay", "--since", "yesterday"],
        ["replay", "--until", "5x"],
        ["replay", "--since", "1h", "--until", "2h"],
        ["replay", "--call-id", "not-a-uuid"],
        ["replay", "--rate", "0/s"],
        ["replay", "--rate", "fast"],
        ["replay", "--new-deadline", "0s"],
        ["replay", "--new-deadline", "2d"],
        ["replay", "--max", "0"],
        ["replay", "--kafka-property", "sasl.password=hunter2"],
        ["replay", "--kafka-property", "novalue"],
        ["replay", "--topic-dlq", "bad topic!"],
        ["replay", "--connect-timeout", "1ms"],
        ["replay", "--nope"],
        ["status"],
        ["status", "123"],
        ["status", uuid, "--window", "0s"],
        ["status", uuid, "--window", "forever"],
        ["topics", "create", "--partitions", "0"],
        ["topics", "create", "--replication-factor", "x"],
        ["topics", "create", "--retention", "10s"],
        ["topics", "create", "--config", "=1"],
        ["topics", "nope"],
        ["send", "--url", "ftp://x", "--app", "a", "--token", token],
        ["send", "--url", "http://x", "--app", "a", "--token", "zz"],
        ["send", "--url", "http://x", "--app", "a", "--token", token, "--environment", "staging"],
        ["send", "--url", "http://x", "--app", "a", "--token", token, "--ring-timeout", "500"],
        ["send", "--url", "http://x", "--app", "a"],
        ["send", "--url", "http://x", "--app", "a", "--token", token, "--api-key", "secret"],
    ])
    func badFlagsAreRefusedWithAClearMessage(arguments: [String]) {
        do {
            _ = try CallpushCommand.parseAsRoot(arguments)
            Issue.record("accepted \(arguments)")
        } catch {
            let message = CallpushCommand.message(for: error)
            #expect(!message.isEmpty)
            #expect(CallpushCommand.exitCode(for: error) != .success)
        }
    }

    @Test func aSecretPropertyIsAcceptedFromAFileOrTheEnvironmentOnly() throws {
        let command = try parse(ReplayCommand.self, ["replay", "--bootstrap", "k:9092", "--kafka-property", "sasl.password=file:/run/secrets/p",
                                                     "--kafka-property", "security.protocol=SASL_SSL"])
        let resolved = try command.kafka.resolve(environment: ["CALLPUSH_KAFKA_SASL_USERNAME": "svc"], clientID: "t")
        #expect(resolved.configuration.properties == ["sasl.password": "file:/run/secrets/p", "security.protocol": "SASL_SSL",
                                                      "sasl.username": "svc"])
        #expect(!resolved.configuration.description.contains("/run/secrets/p") || resolved.configuration.description.contains("<redacted>"))
    }

    @Test func theEnvironmentFillsInBootstrapAndTopics() throws {
        let command = try parse(StatusCommand.self, ["status", Self.uuid])
        let resolved = try command.kafka.resolve(environment: ["CALLPUSH_KAFKA_BOOTSTRAP": "a:1,b:2", "CALLPUSH_TOPIC_STATUS": "st"], clientID: "t")
        #expect(resolved.configuration.bootstrapServers == ["a:1", "b:2"])
        #expect(resolved.topics.status == "st" && resolved.topics.requests == "voip.call-requests")
        #expect(throws: CLIError.self) { try command.kafka.resolve(environment: [:], clientID: "t") }
        #expect(throws: CLIError.self) { try command.kafka.resolve(environment: ["CALLPUSH_KAFKA_BOOTSTRAP": "nohost"], clientID: "t") }
    }

    @Test func durationsAndTimes() {
        #expect(DurationArgument.parse("500ms") == .milliseconds(500))
        #expect(DurationArgument.parse("2h") == .seconds(7200))
        #expect(DurationArgument.parse("7d") == .seconds(7 * 86_400))
        #expect(DurationArgument.parse("1.5h") == nil && DurationArgument.parse("h") == nil && DurationArgument.parse("-3s") == nil)
        #expect(DurationArgument.format(.seconds(5400)) == "1h30m")
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(TimeArgument(argument: "2h")?.resolve(now: now) == now.addingTimeInterval(-7200))
        #expect(TimeArgument(argument: "2026-11-21T12:00:00Z") != nil)
    }

    @Test func everyCommandHasHelp() throws {
        let commands: [(any ParsableCommand.Type, String)] = [
            (ReplayCommand.self, "--new-deadline"), (StatusCommand.self, "--follow"), (TopicsCommand.self, "create"),
            (TopicsCreateCommand.self, "--replication-factor"), (TopicsDescribeCommand.self, "--bootstrap"), (SendCommand.self, "--api-key-file"),
        ]
        for (command, option) in commands {
            let help = CallpushCommand.helpMessage(for: command)
            #expect(help.contains("USAGE") && help.contains(option), "\(command)")
        }
        let parsed = try CallpushCommand.parseAsRoot(["replay", "--help"])
        #expect(String(describing: type(of: parsed)).contains("Help"), "--help is answered with the help screen")
    }
}
