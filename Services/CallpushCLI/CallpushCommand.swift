import ArgumentParser
import Foundation

/// The `callpush` command line.
public struct CallpushCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "callpush",
        abstract: "Rings iPhones: Apple VoIP pushes driven by Kafka.",
        discussion: "Run `callpush dev` to start everything on embedded defaults.",
        subcommands: [DevCommand.self, ReplayCommand.self, StatusCommand.self, TopicsCommand.self, SendCommand.self]
    )

    public init() {}

    /// Parses and runs a command. A bad flag is one line on stderr (not the usage screen) and
    /// exit status 64; `--help` prints the help on stdout.
    public static func main() async {
        do {
            var command = try await asyncParseAsRoot(nil)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            let message = message(for: error)
            if code == .success || message.isEmpty {
                exit(withError: error)
            }
            FileHandle.standardError.write(Data("callpush: \(message.split(separator: "\n").joined(separator: "; ")) (see --help)\n".utf8))
            Foundation.exit(code.rawValue)
        }
    }
}
