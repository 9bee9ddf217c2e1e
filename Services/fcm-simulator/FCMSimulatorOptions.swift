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

    @Option(name: .customLong("latency-ms"), help: "Fault: answer delay, A (fixed) or A-B (uniform), in ms.")
    var latencyMs: String?

    @Option(name: .customLong("error-rate"), help: "Fault: CODE:PROBABILITY, e.g. UNAVAILABLE:0.1 or QUOTA_EXCEEDED:0.05.")
    var errorRate: String?

    @Option(name: .customLong("unregistered"), help: "Fault: answer 404 UNREGISTERED for this registration token. Repeatable.")
    var unregistered: [String] = []

    func validate() throws {
        try common.validate()
        guard (0...65535).contains(port), (0...65535).contains(adminPort) else {
            throw ValidationError("--port and --admin-port must be in 0...65535")
        }
        guard (1...86_400).contains(tokenLifetime) else { throw ValidationError("--token-lifetime must be in 1...86400") }
        guard maxRecorded >= 1 else { throw ValidationError("--max-recorded must be >= 1") }
        guard (1...100_000).contains(maxConnections) else { throw ValidationError("--max-connections must be in 1...100000") }
        _ = try makeFaults()
    }

    func makeFaults() throws -> FCMSimulatorFaults {
        var faults = FCMSimulatorFaults()
        if let latencyMs {
            let parts = latencyMs.split(separator: "-", omittingEmptySubsequences: false).map { Double($0) }
            switch parts.count {
            case 1 where parts[0] != nil:
                faults.latency = FCMLatency(minimumMilliseconds: parts[0]!, maximumMilliseconds: parts[0]!)
            case 2 where parts[0] != nil && parts[1] != nil:
                faults.latency = FCMLatency(minimumMilliseconds: parts[0]!, maximumMilliseconds: parts[1]!)
            default:
                throw ValidationError("--latency-ms must be A or A-B (milliseconds), got '\(latencyMs)'")
            }
        }
        if let errorRate {
            let parts = errorRate.split(separator: ":")
            guard parts.count == 2, !parts[0].isEmpty, let probability = Double(parts[1]) else {
                throw ValidationError("--error-rate must be CODE:PROBABILITY, e.g. UNAVAILABLE:0.1, got '\(errorRate)'")
            }
            faults.errorRate = FCMErrorInjection(error: FCMSimulatedError(errorCode: String(parts[0])), probability: probability)
        }
        for token in unregistered { faults.tokenOutcomes[token] = .unregistered }
        do {
            try faults.validate()
        } catch let error as FCMSimulatorError {
            throw ValidationError(error.message)
        }
        return faults
    }

    func makeConfiguration() throws -> FCMSimulatorConfiguration {
        var configuration = FCMSimulatorConfiguration()
        configuration.host = common.host
        configuration.port = port
        configuration.adminPort = common.noAdmin ? nil : adminPort
        if let cert = common.cert, let key = common.key { configuration.tls = .files(certificateChainPEMPath: cert, privateKeyPEMPath: key) }
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
