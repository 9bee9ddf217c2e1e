import ArgumentParser
import FCM
import FCMSimulator
import Foundation
import Logging
import NIOCore
import NIOPosix
import Locking

/// `callpush-bench fcm`: our FCM client against the FCM simulator at 1 and 4 connections, firebase-admin's
/// `send_each_for_multicast` against the same simulator, and h2load against the simulator and against
/// nghttpd serving the same small answer. Figures only.
struct FCMBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fcm",
        abstract: "FCM client vs firebase-admin on the FCM simulator, and the simulator vs nghttpd (run in release mode).")

    @Option(help: "Messages per measured run of our client.") var messages = 20_000
    @Option(help: "Messages in flight at once (our client, h2load).") var concurrency = 200
    @Option(parsing: .upToNextOption, help: "Connection counts to measure our client at.") var connections: [Int] = [1, 4]
    @Option(help: "Messages firebase-admin sends (send_each_for_multicast, 500 per call).") var firebaseMessages = 2_000
    @Option(help: "Requests per h2load run.") var h2loadRequests = 50_000
    @Option(help: "Threads of the servers (fcm-simulator --threads, nghttpd -n).") var serverThreads = 1
    @Flag(help: "Only measure our client.") var skipPeers = false

    static let clientGroup = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
    static let cpu = CPUFigures()
    static let token = "YmVuY2g:APA91bBenchTokenBenchTokenBenchTokenBenchTokenBenchTokenBenchToken"
    static let data = ["callId": "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", "handle": "driver-1234", "displayName": "Driver Tanaka",
                       "hasVideo": "false", "ackToken": "v1.1b4e28ba.0123456789abcdef0123456789abcdef"]

    func run() async throws {
        var logger = Logger(label: "callpush-bench.fcm")
        logger.logLevel = .error
        print("\(messages) messages per run, \(concurrency) in flight; simulator threads \(serverThreads)")
        var rows: [BenchmarkRow] = []
        for count in connections {
            let simulator = try await FCMSimulatorProcess.start(threads: serverThreads)
            defer { simulator.stop() }
            let row = try await measureClient(connections: count, simulator: simulator, logger: logger, cpuOfServer: simulator.process.processIdentifier)
            rows.append(row)
            print(row.formatted)
        }
        for count in connections {
            do {
                let row = try await measureClientAgainstNghttpd(connections: count, logger: logger)
                rows.append(row)
                print(row.formatted)
            } catch {
                print("ours -> nghttpd (\(count) connections) failed: \(error)")
            }
        }
        if !skipPeers {
            rows += await runPeers()
        }
        print("\n" + BenchmarkRow.header)
        for row in rows { print(row.formatted) }
        print("\nCPU per message, user + system µs (what each side spends, whatever else the machine runs):")
        for line in Self.cpu.lines { print("  " + line.text) }
        if let ours = Self.cpu.client("ours -> nghttpd", 1), let python = Self.cpu.client("firebase-admin multicast", 0) {
            print(String(format: "firebase-admin CPU/ours CPU per message (1 connection): %.1f", python / ours))
        }
        func rate(_ name: String, _ connections: Int) -> Double? {
            rows.first { $0.name == name && $0.connections == connections }?.rate
        }
        if let ours = rate("ours -> fcm-simulator", 1), let python = rate("firebase-admin multicast", 0) {
            print(String(format: "ours (1 connection)/firebase-admin: %.1f (target >= 10)", ours / python))
        }
        if let ours = rate("ours -> fcm-simulator", 4), let python = rate("firebase-admin multicast", 0) {
            print(String(format: "ours (4 connections)/firebase-admin: %.1f (target >= 10)", ours / python))
        }
        for clients in connections {
            if let alone = rate("ours -> nghttpd", clients), let python = rate("firebase-admin multicast", 0) {
                print(String(format: "ours -> nghttpd (%d connections)/firebase-admin -> simulator: %.1f", clients, alone / python))
            }
        }
        for clients in [1, 4] {
            if let simulator = rate("h2load -> fcm-simulator", clients), let nghttpd = rate("h2load -> nghttpd", clients) {
                print(String(format: "fcm-simulator/nghttpd under h2load (%d connections): %.2f", clients, simulator / nghttpd))
            }
            if let ours = rate("ours -> fcm-simulator", clients), let simulator = rate("h2load -> fcm-simulator", clients) {
                print(String(format: "ours/h2load on the simulator (%d connections): %.2f (below 1: the simulator is not the bottleneck)", clients, ours / simulator))
            }
        }
    }

    private func measureClient(
        connections: Int, simulator: FCMSimulatorProcess, logger: Logger, name: String = "ours -> fcm-simulator",
        endpoint: (port: Int, caCertificatePEM: String)? = nil, cpuOfServer server: Int32
    ) async throws -> BenchmarkRow {
        let account = try FCMServiceAccount(contentsOfFile: simulator.serviceAccountPath)
        let simulatorCA = try String(contentsOfFile: simulator.caPath, encoding: .utf8)
        let client = try FCMClient.localSimulator(
            port: endpoint?.port ?? simulator.port, caCertificatePEM: simulatorCA,
            apps: ["bench": FCMApp(serviceAccount: account)],
            configure: {
                $0.connections = connections
                $0.requestTimeout = .seconds(30)
                $0.maxPendingRequests = concurrency * 2
                if let endpoint { $0.additionalTrustedCAPEM.append(endpoint.caCertificatePEM) }
            },
            eventLoopGroup: Self.clientGroup, logger: logger)
        let message = FCMMessage(app: "bench", token: Self.token, data: Self.data, collapseKey: Self.data["callId"]!, deadline: Date().addingTimeInterval(600))
        _ = await drive(client: client, message: message, total: min(messages, 5_000))  // warm-up: token, connections
        let cpuBefore = (ProcessCPU.read(pid: nil), ProcessCPU.read(pid: server))
        let start = ContinuousClock.now
        let result = await drive(client: client, message: message, total: messages)
        let elapsed = ContinuousClock.now - start
        let cpuAfter = (ProcessCPU.read(pid: nil), ProcessCPU.read(pid: server))
        Self.cpu.add(name, connections, client: ProcessCPU.microseconds(cpuBefore.0?.own, cpuAfter.0?.own, per: messages),
                server: ProcessCPU.microseconds(cpuBefore.1?.own, cpuAfter.1?.own, per: messages),
                serverName: endpoint == nil ? "simulator" : "nghttpd")
        await client.shutdown()
        return BenchmarkRow(
            name: name, connections: connections, requests: messages, failures: result.failures,
            seconds: elapsed.inSeconds, p50: result.percentile(0.50), p99: result.percentile(0.99))
    }

    /// Our client's own capacity: its sends answered by nghttpd (a static `{"name": …}`), its access token from a
    /// simulator. The simulator's CPU cost is then out of the measurement.
    private func measureClientAgainstNghttpd(connections: Int, logger: Logger) async throws -> BenchmarkRow {
        let simulator = try await FCMSimulatorProcess.start(threads: serverThreads)
        defer { simulator.stop() }
        let nghttpd = try await SimulatorPeers.Nghttpd.start(
            path: "/v1/projects/\(simulator.project)/messages:send", answer: Self.nghttpdAnswer, threads: serverThreads)
        defer { nghttpd.stop() }
        return try await measureClient(
            connections: connections, simulator: simulator, logger: logger, name: "ours -> nghttpd",
            endpoint: (nghttpd.port, nghttpd.caCertificatePEM), cpuOfServer: nghttpd.process.processIdentifier)
    }

    static let nghttpdAnswer = #"{"name":"projects/callpush-bench/messages/0:1700000000000000%0123456789abcdef"}"#

    private func drive(client: FCMClient, message: FCMMessage, total: Int) async -> LatencySample {
        await driveConcurrently(total: total, workers: concurrency) {
            let outcome = await client.send(message)
            return outcome.isSent ? outcome.latency.inSeconds * 1000 : nil
        }
    }

    /// firebase-admin, then h2load against the simulator and nghttpd (the same small JSON answer).
    private func runPeers() async -> [BenchmarkRow] {
        var rows: [BenchmarkRow] = []
        do {
            let simulator = try await FCMSimulatorProcess.start(threads: serverThreads)
            defer { simulator.stop() }
            var environment = ProcessInfo.processInfo.environment
            environment["REQUESTS_CA_BUNDLE"] = simulator.caPath
            let before = (ProcessCPU.read(pid: nil), ProcessCPU.read(pid: simulator.process.processIdentifier))
            let output = try await SimulatorPeers.run(try SimulatorPeers.which("python3"), [
                Self.firebaseScript, "--mode", "bench", "--base-url", "https://127.0.0.1:\(simulator.port)",
                "--service-account", simulator.serviceAccountPath, "--count", String(firebaseMessages),
            ], timeout: 600, environment: environment)
            let after = (ProcessCPU.read(pid: nil), ProcessCPU.read(pid: simulator.process.processIdentifier))
            // The Python process is this process's only child waited for in between: its CPU is the children's.
            Self.cpu.add("firebase-admin multicast", 0, client: ProcessCPU.microseconds(before.0?.children, after.0?.children, per: firebaseMessages),
                    server: ProcessCPU.microseconds(before.1?.own, after.1?.own, per: firebaseMessages), serverName: "simulator")
            guard let line = output.stdout.split(separator: "\n").last,
                let json = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let seconds = json["seconds"] as? Double, let ok = json["ok"] as? Int
            else { throw SimulatorPeers.PeerError(description: "send_fcm.py failed (\(output.status)): \(output.stdout) \(output.stderr)") }
            let row = BenchmarkRow(
                name: "firebase-admin multicast", connections: 0, requests: firebaseMessages, failures: firebaseMessages - ok,
                seconds: seconds, p50: nil, p99: nil)
            print(row.formatted)
            rows.append(row)
        } catch {
            print("firebase-admin failed: \(error)")
        }
        let body = #"{"message":{"token":"\#(Self.token)","data":{"callId":"1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b","handle":"driver-1234","displayName":"Driver Tanaka","hasVideo":"false","ackToken":"v1.1b4e28ba.0123456789abcdef0123456789abcdef"},"android":{"priority":"HIGH","ttl":"30s","collapse_key":"1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b","direct_boot_ok":true}}}"#
        for clients in [1, 4] {
            let load = SimulatorPeers.Load(
                requests: h2loadRequests, clients: clients, streamsPerClient: max(1, min(100, concurrency / clients)), threads: 1,
                warmUpRequests: min(h2loadRequests, 10_000), serverThreads: serverThreads)
            do {
                let simulator = try await FCMSimulatorProcess.start(threads: serverThreads)
                defer { simulator.stop() }
                let token = try await simulator.accessToken()
                let path = "/v1/projects/\(simulator.project)/messages:send"
                let directory = try SimulatorPeers.temporaryDirectory("h2load-fcm")
                defer { try? FileManager.default.removeItem(atPath: directory) }
                rows.append(try await h2loadRow("h2load -> fcm-simulator", server: simulator.process.processIdentifier, serverName: "simulator",
                                                load: load) {
                    try await SimulatorPeers.h2load(
                        port: simulator.port, headers: ["content-type: application/json", "authorization: Bearer \(token)"], load: load,
                        directory: directory, path: path, body: body)
                })
            } catch {
                print("h2load -> fcm-simulator (\(clients) connections) failed: \(error)")
            }
            do {
                let path = "/v1/projects/callpush-bench/messages:send"
                let nghttpd = try await SimulatorPeers.Nghttpd.start(path: path, answer: Self.nghttpdAnswer, threads: serverThreads)
                defer { nghttpd.stop() }
                rows.append(try await h2loadRow("h2load -> nghttpd", server: nghttpd.process.processIdentifier, serverName: "nghttpd", load: load) {
                    try await SimulatorPeers.h2load(
                        port: nghttpd.port, headers: ["content-type: application/json", "authorization: Bearer ya29.bench"], load: load,
                        directory: nghttpd.directory, path: path, body: body)
                })
            } catch {
                print("h2load -> nghttpd (\(clients) connections) failed: \(error)")
            }
        }
        return rows
    }

    /// One h2load run against a server process: its row, and the server's CPU time per request.
    private func h2loadRow(_ name: String, server: pid_t, serverName: String, load: SimulatorPeers.Load,
                           run: () async throws -> SimulatorPeers.H2LoadFigures) async throws -> BenchmarkRow {
        let before = ProcessCPU.read(pid: server)
        let figures = try await run()
        let after = ProcessCPU.read(pid: server)
        Self.cpu.add(name, load.clients, client: nil,
                     server: ProcessCPU.microseconds(before?.own, after?.own, per: load.requests + load.warmUpRequests), serverName: serverName)
        return row(name, load.clients, figures)
    }

    private func row(_ name: String, _ clients: Int, _ figures: SimulatorPeers.H2LoadFigures) -> BenchmarkRow {
        let row = BenchmarkRow(
            name: name, connections: clients, requests: figures.requests, failures: figures.requests - figures.status2xx,
            seconds: figures.seconds, p50: figures.p50Milliseconds, p99: figures.p99Milliseconds)
        print(row.formatted)
        return row
    }

    static var firebaseScript: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tests/FCMSimulatorTests/firebase_admin/send_fcm.py").path
    }
}

/// The `fcm-simulator` executable (built next to the benchmark) as its own process, like nghttpd: a fresh
/// service account and CA in a temporary directory, records bounded.
struct FCMSimulatorProcess {
    let process: Process
    let directory: String
    let port: Int
    let adminPort: Int
    let project = "callpush-bench"
    var caPath: String { "\(directory)/ca.pem" }
    var serviceAccountPath: String { "\(directory)/service-account.json" }

    static func start(threads: Int) async throws -> FCMSimulatorProcess {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("fcm-simulator").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw SimulatorPeers.PeerError(description: "fcm-simulator is not built next to callpush-bench (swift build -c release)")
        }
        let directory = try SimulatorPeers.temporaryDirectory("fcm-sim")
        let outputPath = "\(directory)/simulator.out"
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "--port", "0", "--admin-port", "0", "--project", "callpush-bench", "--max-recorded", "10000", "--threads", String(threads),
            "--write-ca", "\(directory)/ca.pem", "--write-service-account", "\(directory)/service-account.json", "--log-level", "warning",
        ]
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<3000 {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.contains("fcm-simulator ready") }) {
                let words = line.split(separator: " ")
                func portNumber(after prefix: String) -> Int? {
                    guard let word = words.first(where: { $0.hasPrefix(prefix) }), let last = word.split(separator: ":").last else { return nil }
                    return Int(last.prefix { $0.isNumber })
                }
                guard let mainPort = portNumber(after: "https://"), let admin = portNumber(after: "http://") else { break }
                return FCMSimulatorProcess(process: process, directory: directory, port: mainPort, adminPort: admin)
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        process.terminate()
        throw SimulatorPeers.PeerError(description: "fcm-simulator did not get ready: \((try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "")")
    }

    /// An access token from the admin API (`POST /admin/access-tokens`), for h2load.
    func accessToken() async throws -> String {
        let output = try await SimulatorPeers.run(
            try SimulatorPeers.which("curl"), ["-s", "-X", "POST", "http://127.0.0.1:\(adminPort)/admin/access-tokens"], timeout: 10)
        guard let json = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any],
            let token = json["access_token"] as? String
        else { throw SimulatorPeers.PeerError(description: "no access token from the admin API: \(output.stdout)") }
        return token
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// CPU time per message of each measured row: the client's (this process, or the Python child) and the server's.
/// Throughput on the shared 2-core machine moves with whatever else runs; CPU per message barely does.
final class CPUFigures: @unchecked Sendable {
    struct Line {
        var name: String
        var connections: Int
        var client: Double?
        var server: Double?
        var text: String
    }

    private(set) var lines: [Line] = []

    func add(_ name: String, _ connections: Int, client: Double?, server: Double?, serverName: String) {
        var parts: [String] = []
        if let client { parts.append(String(format: "client %.1f", client)) }
        if let server { parts.append(String(format: "%@ %.1f", serverName, server)) }
        let label = connections == 0 ? name : "\(name) (\(connections) connections)"
        lines.append(Line(name: name, connections: connections, client: client, server: server, text: "\(label): " + parts.joined(separator: ", ")))
    }

    func client(_ name: String, _ connections: Int) -> Double? {
        lines.first { $0.name == name && $0.connections == connections }?.client
    }
}

/// User + system CPU seconds of a process and of its waited-for children, from `/proc/<pid>/stat` (Linux).
enum ProcessCPU {
    struct Reading {
        var own: Double
        var children: Double
    }

    /// `pid` nil: this process.
    static func read(pid: Int32?) -> Reading? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid.map(String.init) ?? "self")/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // After the command name: state is field 3; utime, stime, cutime, cstime are fields 14-17.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 14, let user = Double(fields[11]), let system = Double(fields[12]),
            let childUser = Double(fields[13]), let childSystem = Double(fields[14])
        else { return nil }
        let ticks = 100.0  // USER_HZ: /proc's clock ticks per second on Linux
        return Reading(own: (user + system) / ticks, children: (childUser + childSystem) / ticks)
    }

    static func microseconds(_ before: Double?, _ after: Double?, per count: Int) -> Double? {
        guard let before, let after, count > 0 else { return nil }
        return (after - before) * 1_000_000 / Double(count)
    }
}
