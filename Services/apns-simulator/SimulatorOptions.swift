import APNsSimulator
import ArgumentParser
import Foundation
import Logging
import SimulatorCommand

/// Command-line options of `apns-simulator`, turned into an ``APNSSimulatorConfiguration`` in one place.
struct SimulatorOptions: ParsableArguments {
    @OptionGroup var common: SimulatorCommonOptions

    @Option(help: "HTTP/2 port (0 = any free port). APNs itself uses 443 and 2197.")
    var port: Int = 2197

    @Option(name: .customLong("admin-port"), help: "Admin HTTP/1.1 port (0 = any free port).")
    var adminPort: Int = 2198

    @Option(
        name: .customLong("token-key"),
        help: "Accepted JWT key as TEAM_ID:KEY_ID:PATH; PATH is a .p8 private key or a public key PEM. Repeatable."
    )
    var tokenKeys: [String] = []

    @Option(help: "sandbox (adds apns-unique-id to 200 answers) or production.")
    var environment: String = "sandbox"

    @Flag(name: .customLong("allow-unauthenticated"), help: "Accept requests without an authorization header.")
    var allowUnauthenticated = false

    @Option(name: .customLong("client-ca"), help: "PEM CA for client certificates (certificate auth instead of JWT).")
    var clientCA: String?

    @Flag(name: .customLong("require-client-certificate"), help: "Refuse TLS clients without a certificate (needs --client-ca).")
    var requireClientCertificate = false

    @Option(name: .customLong("max-concurrent-streams"), help: "SETTINGS_MAX_CONCURRENT_STREAMS announced.")
    var maxConcurrentStreams: Int = 1000

    @Flag(name: .customLong("ramp-up-streams"), help: "Announce 1 stream until the first authenticated success, like APNs.")
    var rampUpStreams = false

    @Option(name: .customLong("max-recorded"), help: "Accepted pushes kept in memory (oldest dropped).")
    var maxRecorded: Int = 100_000

    @Option(name: .customLong("goaway-after"), help: "Fault: send GOAWAY after N streams per connection.")
    var goAwayAfter: Int?

    @Option(name: .customLong("goaway-reason"), help: "Fault: reason in the GOAWAY debug data.")
    var goAwayReason: String = "Shutdown"

    @Option(name: .customLong("drop-after"), help: "Fault: reset the TCP connection at stream N+1 per connection.")
    var dropAfter: Int?

    @Option(name: .customLong("reject-connections"), help: "Fault: answer each connection's first stream with GOAWAY(last-stream-id 0) carrying this reason, e.g. BadCertificateEnvironment, and close.")
    var rejectConnections: String?

    @Option(name: .customLong("refused-stream-rate"), help: "Fault: reset this fraction (0-1) of new streams with REFUSED_STREAM.")
    var refusedStreamRate: Double = 0

    @Option(name: .customLong("error-rate"), help: "Fault: STATUS:PROBABILITY, e.g. 503:0.1 (429, 500 or 503).")
    var errorRate: String?

    @Option(name: .customLong("unregistered"), help: "Fault: answer 410 Unregistered for this token. Repeatable.")
    var unregistered: [String] = []

    @Option(name: .customLong("bad-device-token"), help: "Fault: answer 400 BadDeviceToken for this token. Repeatable.")
    var badDeviceTokens: [String] = []

    @Option(name: .customLong("no-response-token"), help: "Fault: never answer pushes to this token. Repeatable.")
    var noResponseTokens: [String] = []

    func validate() throws {
        try common.validate()
        guard APNSEnvironment(rawValue: environment) != nil else {
            throw ValidationError("--environment must be sandbox or production")
        }
        try SimulatorCommonOptions.validatePorts(port: port, adminPort: adminPort)
        guard maxConcurrentStreams >= 1 else { throw ValidationError("--max-concurrent-streams must be >= 1") }
        guard maxRecorded >= 1 else { throw ValidationError("--max-recorded must be >= 1") }
        if requireClientCertificate && clientCA == nil {
            throw ValidationError("--require-client-certificate needs --client-ca")
        }
        _ = try makeFaults()
    }

    func makeFaults() throws -> APNSSimulatorFaults {
        var faults = APNSSimulatorFaults()
        faults.goAwayAfterStreams = goAwayAfter
        faults.goAwayReason = goAwayReason
        faults.dropConnectionAfterStreams = dropAfter
        faults.rejectConnections = rejectConnections
        faults.refusedStreamRate = refusedStreamRate
        if let latency = try common.latencyMilliseconds() {
            faults.latency = latency.maximum.map { LatencyDistribution.uniform(minimumMilliseconds: latency.minimum, maximumMilliseconds: $0) }
                ?? .fixed(milliseconds: latency.minimum)
        }
        if let errorRate {
            let parts = errorRate.split(separator: ":")
            guard parts.count == 2, let status = Int(parts[0]), let probability = Double(parts[1]) else {
                throw ValidationError("--error-rate must be STATUS:PROBABILITY, e.g. 503:0.1, got '\(errorRate)'")
            }
            faults.errorRate = ErrorInjection(status: status, probability: probability)
        }
        for token in unregistered { faults.tokenOutcomes[token] = .unregistered() }
        for token in badDeviceTokens { faults.tokenOutcomes[token] = .badDeviceToken }
        for token in noResponseTokens { faults.tokenOutcomes[token] = .noResponse }
        try SimulatorCommonOptions.usageChecked { try faults.validate() }
        return faults
    }

    func makeConfiguration() throws -> APNSSimulatorConfiguration {
        var configuration = APNSSimulatorConfiguration()
        common.configureListener(&configuration, port: port, adminPort: adminPort)
        configuration.environment = APNSEnvironment(rawValue: environment) ?? .sandbox
        configuration.allowUnauthenticated = allowUnauthenticated
        configuration.requireClientCertificate = requireClientCertificate
        if let clientCA { configuration.trustedClientCAPEM = try readFile(clientCA, option: "--client-ca") }
        configuration.maxConcurrentStreams = maxConcurrentStreams
        configuration.rampUpConcurrentStreams = rampUpStreams
        configuration.maxRecordedPushes = maxRecorded
        configuration.faults = try makeFaults()
        for spec in tokenKeys {
            let parts = spec.split(separator: ":", maxSplits: 2).map(String.init)
            guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw ValidationError("--token-key must be TEAM_ID:KEY_ID:PATH, got '\(spec)'")
            }
            let pem = try readFile(parts[2], option: "--token-key")
            do {
                configuration.tokenKeys.append(try .init(teamID: parts[0], keyID: parts[1], pem: pem))
            } catch {
                throw ValidationError("--token-key \(parts[0]):\(parts[1]): \(parts[2]) is not a P-256 key PEM")
            }
        }
        return configuration
    }

    private func readFile(_ path: String, option: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ValidationError("\(option): cannot read \(path)")
        }
        return text
    }
}
