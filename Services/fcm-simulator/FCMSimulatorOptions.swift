import ArgumentParser
import FCMSimulator
import Foundation
import Logging
import SimulatorCommand

/// Command-line options of `fcm-simulator`, turned into an ``FCMSimulatorConfiguration`` in one place.
struct FCMSimulatorOptions: ParsableArguments {
    @OptionGroup var common: SimulatorCommonOptions

    @Option(help: "HTTPS port for FCM and the token endpoint (0 = any free port).")
    var port: Int = 9443

    @Option(name: .customLong("admin-port"), help: "Admin HTTP/1.1 port (0 = any free port).")
    var adminPort: Int = 9444

    @Option(name: .customLong("service-account"), help: "Accept grants of this service-account JSON file (repeatable). Without it one is generated.")
    var serviceAccounts: [String] = []

    @Option(help: "Project id of the generated service account.")
    var project: String = "callpush-simulator"

    @Option(name: .customLong("write-service-account"), help: "Write the (first) service account's JSON, token_uri pointing here, to this file (mode 0600).")
    var writeServiceAccount: String?

    @Option(name: .customLong("token-lifetime"), help: "Lifetime of issued access tokens in seconds (expires_in).")
    var tokenLifetime: Int = 3599

    @Option(name: .customLong("max-recorded"), help: "Accepted messages kept in memory (oldest dropped).")
    var maxRecorded: Int = 100_000

    @Option(name: .customLong("max-connections"), help: "Connections served at once.")
    var maxConnections: Int = 1000

    @Option(name: .customLong("error-rate"), help: "Fault: CODE:PROBABILITY, e.g. UNAVAILABLE:0.1 or QUOTA_EXCEEDED:0.05.")
    var errorRate: String?

    @Option(name: .customLong("unregistered"), help: "Fault: answer 404 UNREGISTERED for this registration token. Repeatable.")
    var unregistered: [String] = []

    func validate() throws {
        try common.validate()
        try SimulatorCommonOptions.validatePorts(port: port, adminPort: adminPort)
        guard (1...86_400).contains(tokenLifetime) else { throw ValidationError("--token-lifetime must be in 1...86400") }
        guard maxRecorded >= 1 else { throw ValidationError("--max-recorded must be >= 1") }
        guard (1...100_000).contains(maxConnections) else { throw ValidationError("--max-connections must be in 1...100000") }
        _ = try makeFaults()
    }

    func makeFaults() throws -> FCMSimulatorFaults {
        var faults = FCMSimulatorFaults()
        if let latency = try common.latencyMilliseconds() {
            faults.latency = FCMLatency(minimumMilliseconds: latency.minimum, maximumMilliseconds: latency.maximum ?? latency.minimum)
        }
        if let errorRate {
            let parts = errorRate.split(separator: ":")
            guard parts.count == 2, !parts[0].isEmpty, let probability = Double(parts[1]) else {
                throw ValidationError("--error-rate must be CODE:PROBABILITY, e.g. UNAVAILABLE:0.1, got '\(errorRate)'")
            }
            faults.errorRate = FCMErrorInjection(error: FCMSimulatedError(errorCode: String(parts[0])), probability: probability)
        }
        for token in unregistered { faults.tokenOutcomes[token] = .unregistered }
        try SimulatorCommonOptions.usageChecked { try faults.validate() }
        return faults
    }

    func makeConfiguration() throws -> FCMSimulatorConfiguration {
        var configuration = FCMSimulatorConfiguration()
        common.configureListener(&configuration, port: port, adminPort: adminPort)
        configuration.accessTokenLifetime = .seconds(tokenLifetime)
        configuration.maxRecordedMessages = maxRecorded
        configuration.maxConnections = maxConnections
        configuration.faults = try makeFaults()
        for path in serviceAccounts {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("--service-account: cannot read \(path)")
            }
            do {
                configuration.serviceAccounts.append(try FCMSimulatorServiceAccount(json: data))
            } catch {
                throw ValidationError("--service-account \(path): \(error)")
            }
        }
        if configuration.serviceAccounts.isEmpty {
            do {
                configuration.serviceAccounts = [try FCMSimulatorServiceAccount.generate(projectID: project)]
            } catch {
                throw ValidationError("cannot generate a service account for project \(project): \(error)")
            }
        }
        return configuration
    }
}
