import ArgumentParser
import Foundation
import Logging

/// `callpush-campaign`: the fault campaign and the soak, run against real processes on loopback.
@main
struct CallpushCampaign: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "callpush-campaign",
        abstract: "Fault campaign and soak: the embedded Kafka cluster in this process, the APNs and FCM simulators, dispatch and push-workers as child processes.",
        subcommands: [FaultCampaign.self, Soak.self],
        defaultSubcommand: FaultCampaign.self)
}

/// Options both commands share.
struct StackOptions: ParsableArguments {
    @Option(help: "Directory holding the built apns-simulator, fcm-simulator, dispatch, push-worker and callpush.")
    var binDir = ".build/debug"
    @Option(help: "Working directory for keys, config files and process logs (default: a new temporary one).")
    var workDir: String?
    @Option(help: "Number of push-workers.") var workers = 3
    @Option(help: "Log level of this process (the cluster and the observer).") var logLevel = "critical"

    func makeDirectory(_ prefix: String) -> String {
        workDir ?? (NSTemporaryDirectory() + "\(prefix)-\(ProcessInfo.processInfo.processIdentifier)-\(Int(Date().timeIntervalSince1970))")
    }

    var logger: Logger {
        var logger = Logger(label: "campaign")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .error
        return logger
    }
}

/// Writes one line to standard output at once (unbuffered, so progress shows when piped).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Starts the collector and the stack, runs a campaign's measured part, then stops both whether it
/// succeeded or not; an error is said as `label: error` and ends the program with status 2.
func withRunningStack(_ stack: Stack, collector: OutcomeCollector, label: String, _ body: () async throws -> Void) async throws {
    collector.start()
    do {
        try await stack.start()
        try await body()
    } catch {
        say("\(label): \(error)")
        await collector.stop()
        await stack.stop()
        throw ExitCode(2)
    }
    await collector.stop()
    await stack.stop()
}
