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
