import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle

/// `callpush dev`: everything on embedded defaults in one process.
struct DevCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev",
        abstract: "Run callpush on embedded defaults: embedded Kafka, the APNs simulator and push-workers.",
        discussion: """
            Starts librdkafka's mock cluster (reachable by any Kafka client on the printed bootstrap \
            address) with the three topics, the APNs simulator with a generated certificate and token \
            key, and push-workers that deliver to it. Prints how to ring a simulated phone. Ctrl-C \
            stops everything cleanly.
            """
    )

    @Option(help: "Brokers in the embedded Kafka cluster.")
    var brokers = 3

    @Option(help: "Partitions of the requests and status topics.")
    var partitions = 6

    @Option(help: "Push-workers to run (members of one consumer group).")
    var workers = 2

    @Option(help: "Write a JSON description of the running system (addresses, topics, CA path) here once it is ready.")
    var stateFile: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "notice"

    func validate() throws {
        guard (1...9).contains(brokers) else { throw ValidationError("--brokers must be between 1 and 9") }
        guard (1...256).contains(partitions) else { throw ValidationError("--partitions must be between 1 and 256") }
        guard (1...16).contains(workers) else { throw ValidationError("--workers must be between 1 and 16") }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    func run() async throws {
        var logger = Logger(label: "callpush.dev")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .notice
        let stack: DevStack
        do {
            stack = try await DevStack.start(
                .init(brokers: brokers, partitions: partitions, workers: workers), logger: logger)
        } catch {
            FileHandle.standardError.write(Data("callpush dev: could not start: \(error)\n".utf8))
            throw ExitCode.failure
        }
        FileHandle.standardOutput.write(Data((stack.banner() + "\n").utf8))
        if let stateFile {
            try stack.state.write(to: stateFile)
        }
        let group = ServiceGroup(configuration: .init(services: stack.services.map { .init(service: $0) },
                                                      gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        FileHandle.standardOutput.write(Data("callpush dev: stopped\n".utf8))
    }
}
