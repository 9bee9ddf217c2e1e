import ArgumentParser
import CallContract
import Foundation

/// `callpush status <callId>`: a call's status history from the status topic.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show a call's status history from the status topic.",
        discussion: """
            Reads the status topic from now minus --window and prints every status of the call: \
            time, device, state, attempt, replay generation, APNs answer and error — as a table, or \
            as JSON lines (the contract's CallStatus documents) with --json. --follow keeps reading \
            until every delivery seen is in a terminal state, or Ctrl-C. Exit status 3 when the call \
            has no status in the window. --trace then prints the call's spans as a timeline, read \
            from the trace collector `callpush dev` runs (--trace-url), and the trace ids the \
            statuses carry (to look up in any tracing backend).
            """
    )

    @OptionGroup var kafka: KafkaOptions

    @Argument(help: "The call id (a UUID).")
    var callId: String

    @Flag(help: "Keep reading until every delivery is terminal (or Ctrl-C).")
    var follow = false

    @Flag(help: "Print JSON lines (one CallStatus per line) instead of a table.")
    var json = false

    @Option(help: "How far back to read the status topic.")
    var window = DurationArgument(.seconds(3600))

    @Flag(help: "Also print the call's spans as a timeline (from the trace collector of `callpush dev`).")
    var trace = false

    @Option(help: "The trace collector's URL (default: CALLPUSH_TRACE_URL, else callpush dev's \(DevState.defaultTraceURL)).")
    var traceURL: String?

    func validate() throws {
        guard CallID.normalize(callId) != nil else { throw ValidationError("<call-id> must be a UUID, got '\(callId.prefix(40))'") }
        guard window.duration >= .seconds(1), window.duration <= .seconds(30 * 86_400) else {
            throw ValidationError("--window must be between 1s and 30d")
        }
        if let traceURL, HTTPExchange.validate(traceURL) == nil {
            throw ValidationError("--trace-url must be an http:// or https:// URL, got '\(traceURL.prefix(60))'")
        }
    }

    func run() async throws {
        try await CommandRunner.run("status") {
            let interruption = Interruption()
            interruption.installSignalHandlers()
            let count = try await reader(environment: ProcessInfo.processInfo.environment, output: .standard,
                                         interruption: interruption).run()
            if count == 0 && !interruption.isRequested {
                throw CLIError("not-found", "no status for call \(CallID.normalize(callId) ?? callId) in the last "
                               + "\(DurationArgument.format(window.duration)) (a longer --window reads further back)", exitCode: CLIExit.notFound)
            }
            return interruption.isRequested ? CLIExit.interrupted : CLIExit.success
        }
    }

    /// The reader for these options (tests call it with their own output and environment).
    func reader(environment: [String: String], output: CommandOutput, interruption: Interruption = Interruption()) throws -> StatusReader {
        let resolved = try kafka.resolve(environment: environment, clientID: "callpush-status")
        var reader = StatusReader(kafka: resolved, callId: CallID.normalize(callId) ?? callId, window: window.duration,
                                  logger: CLILogger.make("callpush.status", environment: environment), output: output,
                                  interruption: interruption)
        reader.follow = follow
        reader.json = json
        if trace {
            let text = traceURL ?? environment["CALLPUSH_TRACE_URL"] ?? DevState.defaultTraceURL
            guard let url = HTTPExchange.validate(text) else {
                throw CLIError.usage("CALLPUSH_TRACE_URL must be an http:// or https:// URL")
            }
            reader.traceSource = url
        }
        return reader
    }
}
