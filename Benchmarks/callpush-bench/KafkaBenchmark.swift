import ArgumentParser

struct KafkaBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "kafka", abstract: "Kafka layer vs kcat (not yet written).")
    func run() async throws { print("not yet") }
}
