import ArgumentParser
import FCMSimulator
import Foundation
import Logging
import SimulatorCommand
import ServiceLifecycle

/// `fcm-simulator`: runs the FCM simulator until SIGTERM / SIGINT.
@main
struct FCMSimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fcm-simulator",
        abstract: "An HTTPS server (HTTP/2 and HTTP/1.1) that behaves like FCM's HTTP v1 API and its OAuth2 token endpoint.",
        discussion: """
            Accepts POST /v1/projects/<project>/messages:send like FCM, with access tokens from its own token \
            endpoint (POST /token, JWT grants of its service accounts), answers with FCM's error JSON, records \
            accepted messages and injects faults. An admin HTTP/1.1 API (GET/DELETE /admin/messages, GET/PUT \
            /admin/faults, GET /admin/stats, GET /admin/ca, GET /admin/service-account, DELETE /admin/access-tokens) \
            runs on --admin-port. See docs/fcm-simulator.md.
            """
    )

    @OptionGroup var options: FCMSimulatorOptions

    func run() async throws {
        options.common.bootstrapLogging()
        let logger = Logger(label: "fcm-simulator")
        let simulator = try FCMSimulator(
            configuration: try options.makeConfiguration(), logger: logger, eventLoopGroup: options.common.makeEventLoopGroup())
        if let path = options.common.writeCA { try simulator.writeCACertificate(to: path) }
        let serviceAccountPath = options.writeServiceAccount, hostForURL = options.common.hostForURL
        try await runSimulator(simulator, logger: logger) {
            try await simulator.start()
            if let path = serviceAccountPath { try simulator.writeServiceAccount(to: path) }
            let admin = simulator.adminPort.map { " admin http://\(hostForURL):\($0)/admin" } ?? " admin off"
            // Unbuffered, so a parent process sees the line at once.
            FileHandle.standardOutput.write(Data("fcm-simulator ready: \(simulator.baseURL) token \(simulator.tokenURI)\(admin)\n".utf8))
        }
    }
}
