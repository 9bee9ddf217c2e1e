import ArgumentParser

/// The `callpush` command line.
public struct CallpushCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "callpush",
        abstract: "Rings iPhones: Apple VoIP pushes driven by Kafka.",
        discussion: "Run `callpush dev` to start everything on embedded defaults.",
        subcommands: [DevCommand.self]
    )

    public init() {}
}
