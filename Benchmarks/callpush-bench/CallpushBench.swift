import ArgumentParser

/// Release-mode benchmarks that print figures (see docs/benchmarks.md).
/// Each subcommand measures one part of callpush against a peer in the same run.
@main
struct CallpushBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "callpush-bench",
        abstract: "Benchmarks for callpush: prints figures, never asserts timings.",
        subcommands: [KafkaBenchmark.self, APNSBenchmark.self, FCMBenchmark.self, WorkerBenchmark.self, DispatchBenchmark.self, StepsBenchmark.self, DeliveryBenchmark.self,
                      DrainBenchmark.self]
    )
}

extension Array where Element == Double {
    /// The middle value (the mean of the two middle ones for an even count); 0 when empty.
    var median: Double {
        let sorted = self.sorted()
        guard !sorted.isEmpty else { return 0 }
        let half = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[half] : (sorted[half - 1] + sorted[half]) / 2
    }
}
