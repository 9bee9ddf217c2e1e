import Foundation
import Locking

/// The progress line on stderr (at most once a second): records examined of the total,
/// the rate and the time left; and the final summary on stdout.
struct ReplayProgress: Sendable {
    let output: CommandOutput
    let dryRun: Bool
    private let started = ContinuousClock.now
    private var lastPrinted = ContinuousClock.now

    init(output: CommandOutput, dryRun: Bool) {
        self.output = output
        self.dryRun = dryRun
    }

    mutating func update(_ counts: ReplayCounts) {
        let now = ContinuousClock.now
        guard now - lastPrinted >= .seconds(1) else { return }
        lastPrinted = now
        output.error(Self.line(counts, elapsed: now - started, dryRun: dryRun))
    }

    func finish(_ counts: ReplayCounts) {
        output.error(Self.line(counts, elapsed: ContinuousClock.now - started, dryRun: dryRun))
    }

    /// `replay: 120/500 examined, 80 replayed, 45.0 records/s, ETA 8s`
    static func line(_ counts: ReplayCounts, elapsed: Duration, dryRun: Bool) -> String {
        let seconds = max(elapsed.inSeconds, 0.001)
        let rate = Double(counts.examined) / seconds
        let left = max(0, counts.total - counts.examined)
        let eta = rate > 0 ? DurationArgument.format(.seconds(Int64((Double(left) / rate).rounded(.up)))) : "?"
        let verb = dryRun ? "selected" : "replayed"
        return "replay: \(counts.examined)/\(counts.total) examined, \(counts.replayed) \(verb), "
            + String(format: "%.1f", rate) + " records/s, ETA \(left == 0 ? "0s" : eta)"
    }

    /// The summary lines printed at the end of a run.
    static func summary(_ summary: ReplayRunner.Summary, dryRun: Bool, group: String) -> [String] {
        let counts = summary.counts
        var lines = [
            "\(dryRun ? "dry run: would replay" : "replayed") \(counts.replayed) of \(counts.examined) records examined"
                + (counts.rearmed > 0 ? " (\(counts.rearmed) re-armed with a new ring deadline)" : ""),
            "  skipped: \(counts.filteredOut) not matching the filters, \(counts.expired) past their ring deadline"
                + (counts.expired > 0 ? " (--new-deadline re-arms them)" : "")
                + ", \(counts.rejected) rejected (undecodable, never replayed), \(counts.notRing) not a ring"
                + (counts.replayLimit > 0 ? ", \(counts.replayLimit) at the replay limit" : ""),
        ]
        if dryRun {
            lines.append("  nothing was published and the position of group \(group) did not move")
        } else {
            lines.append("  position of group \(group) committed after the last record examined")
        }
        if summary.unseen > 0 {
            lines.append("  warning: \(summary.unseen) records of the range were not seen (removed by retention while reading?)")
        }
        if summary.interrupted { lines.append("  interrupted: run the same command again to continue") }
        return lines
    }
}
