import ArgumentParser
import CallContract
import Foundation

/// `callpush replay`: re-publishes dead-lettered rings with the next replay generation.
struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Re-publish dead-lettered deliveries to the requests topic with the next replay generation.",
        discussion: """
            Reads the DLQ from the replay group's committed position up to its end at start, and \
            publishes each selected ring event to the requests topic with `replay` + 1 (otherwise \
            unchanged). Records whose ring deadline has passed are skipped and counted unless \
            --new-deadline re-arms them; undecodable (rejected) records are never replayed. \
            The position is committed after each publish is acknowledged, so an interrupted run \
            started again does not publish a record twice. The position moves past every record \
            examined, matching or not: to replay other records of a range already read, use another \
            --group or --from-beginning. Ctrl-C stops after the record in progress.
            """
    )

    @OptionGroup var kafka: KafkaOptions

    @Option(help: ArgumentHelp("Only records that failed at or after this time: RFC 3339 or an age like 2h.", valueName: "time"))
    var since: TimeArgument?

    @Option(help: ArgumentHelp("Only records that failed before this time: RFC 3339 or an age like 30m.", valueName: "time"))
    var until: TimeArgument?

    @Option(help: "Only this call.")
    var callId: String?

    @Option(help: "Only this app.")
    var app: String?

    @Option(help: ArgumentHelp("Only records with this callpush-error code (e.g. Unregistered, ServiceUnavailable).", valueName: "code"))
    var errorCode: String?

    @Flag(help: "List what would be replayed; publish nothing and keep the position.")
    var dryRun = false

    @Option(help: ArgumentHelp("Publish at most N records per second, e.g. 50/s.", valueName: "N/s"))
    var rate: RateArgument?

    @Option(help: ArgumentHelp("Re-arm expired records: new ring deadline = now + this (e.g. 30s); requestedAt = now.", valueName: "duration"))
    var newDeadline: DurationArgument?

    @Option(help: "Stop after replaying this many records (the rest stays for the next run).")
    var max: Int?

    @Option(help: "The consumer group that keeps the replay position.")
    var group = "callpush-replay"

    @Flag(help: "Ignore the group's committed position and read the DLQ from its beginning.")
    var fromBeginning = false

    func validate() throws {
        if let callId, CallID.normalize(callId) == nil { throw ValidationError("--call-id must be a UUID, got '\(callId.prefix(40))'") }
        if let app, app.isEmpty || app.utf8.count > RingRequest.Limits.appNameBytes {
            throw ValidationError("--app must be 1 to \(RingRequest.Limits.appNameBytes) bytes")
        }
        if let errorCode, errorCode.isEmpty { throw ValidationError("--error-code must not be empty") }
        if let newDeadline, newDeadline.duration < .seconds(1) || newDeadline.duration > .seconds(3600) {
            throw ValidationError("--new-deadline must be between 1s and 1h")
        }
        if let max, max < 1 { throw ValidationError("--max must be at least 1") }
        if group.isEmpty || group.utf8.count > 255 { throw ValidationError("--group must be 1 to 255 characters") }
        if let since, let until, since.resolve(now: Date()) >= until.resolve(now: Date()) {
            throw ValidationError("--since must be before --until")
        }
    }

    func run() async throws {
        try await CommandRunner.run("replay") {
            let interruption = Interruption()
            interruption.installSignalHandlers()
            let environment = ProcessInfo.processInfo.environment
            var runner = try runner(environment: environment, output: .standard, interruption: interruption)
            // With OTEL_* configured, each replay is traced; the exporter is flushed before exiting.
            let exporter = try TracedCommand(serviceName: "callpush-replay", environment: environment, logger: runner.logger)
            runner.tracing = exporter?.tracing ?? .off
            let summary: ReplayRunner.Summary
            do {
                summary = try await runner.run()
            } catch {
                await exporter?.finish()
                throw error
            }
            await exporter?.finish()
            for line in ReplayProgress.summary(summary, dryRun: dryRun, group: group) { CommandOutput.standard.line(line) }
            return summary.interrupted ? CLIExit.interrupted : CLIExit.success
        }
    }

    /// The runner for these options (tests call it with their own output and environment).
    func runner(environment: [String: String], output: CommandOutput, interruption: Interruption = Interruption()) throws -> ReplayRunner {
        let resolved = try kafka.resolve(environment: environment, clientID: "callpush-replay")
        let now = Date()
        var runner = ReplayRunner(kafka: resolved, group: group, logger: CLILogger.make("callpush.replay", environment: environment),
                                  output: output, interruption: interruption)
        runner.fromBeginning = fromBeginning
        runner.dryRun = dryRun
        runner.filter = ReplayFilter(since: since?.resolve(now: now), until: until?.resolve(now: now),
                                     callId: callId.flatMap(CallID.normalize), app: app, errorCode: errorCode)
        runner.newDeadline = newDeadline?.duration
        runner.rate = rate?.perSecond
        runner.maxRecords = max
        return runner
    }
}

/// `--rate 50/s` (or `50`): records per second.
struct RateArgument: ExpressibleByArgument, Sendable, Hashable {
    var perSecond: Double

    init?(argument: String) {
        let number = argument.hasSuffix("/s") ? String(argument.dropLast(2)) : argument
        guard let value = Double(number), value.isFinite, value > 0, value <= 1_000_000 else { return nil }
        perSecond = value
    }
}
