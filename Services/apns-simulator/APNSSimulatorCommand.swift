import APNsSimulator
import ArgumentParser
import Foundation
import Logging
import SimulatorCommand
import ServiceLifecycle

/// `apns-simulator`: runs the APNs simulator until SIGTERM / SIGINT.
@main
struct APNSSimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-simulator",
        abstract: "An HTTP/2 + TLS server that behaves like Apple's APNs provider API, for tests and benchmarks.",
        discussion: """
            Accepts POST /3/device/<token> like APNs, validates headers, payload and ES256 provider tokens, \
            answers with APNs statuses and reasons, records accepted pushes and injects faults. \
            An admin HTTP/1.1 API (GET/DELETE /admin/pushes, GET/PUT /admin/faults, GET /admin/stats, \
            GET /admin/ca) runs on --admin-port. See docs/apns-simulator.md.
            """
    )

    @OptionGroup var options: SimulatorOptions

    func run() async throws {
        options.common.bootstrapLogging()
        let logger = Logger(label: "apns-simulator")
        // NIO's shared group has a thread per core; --threads N gives the simulator a group of its own.
        let simulator = APNSSimulator(
            configuration: try options.makeConfiguration(), logger: logger, eventLoopGroup: options.common.makeEventLoopGroup())
        if let path = options.common.writeCA {
            try simulator.writeCACertificate(to: path)
        }
        let host = options.common.host, hostForURL = options.common.hostForURL
        try await runSimulator(simulator, logger: logger) {
            try await simulator.start()
            let admin = simulator.adminPort.map { " admin http://\(host):\($0)/admin" } ?? " admin off"
            // Unbuffered, so a parent process sees the line at once.
            FileHandle.standardOutput.write(Data("apns-simulator ready: https://\(hostForURL):\(simulator.port)\(admin)\n".utf8))
        }
    }
}
