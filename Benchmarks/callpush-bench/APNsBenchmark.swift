import ArgumentParser

struct APNsBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "apns", abstract: "APNs client and simulator vs h2load / aioapns / nghttpd (not yet written).")
    func run() async throws { print("not yet") }
}
