import APNs
import APNsSimulator
import ArgumentParser
import Crypto
import Foundation
import Locking
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// `callpush-bench apns`: our APNs client against the in-process simulator at 1/2/4 connections,
/// then h2load / aioapns against the same simulator and h2load against nghttpd, with ratios.
struct APNSBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns",
        abstract: "APNs client vs h2load / aioapns on the simulator, and simulator vs nghttpd (run in release mode).")

    @Option(help: "Pushes per measured run.") var pushes = 50_000
    @Option(help: "Pushes in flight at once.") var concurrency = 500
    @Option(parsing: .upToNextOption, help: "Connection counts to measure our client at.") var connections: [Int] = [1, 2, 4]
    @Flag(help: "Only measure our client (skip h2load, aioapns, nghttpd).") var skipPeers = false
    @Option(help: "Instead of the benchmark: send this many pushes at once (per connection count) and print the outcomes.")
    var burst: Int?
    @Option(help: "Deadline of each push in milliseconds.") var requestTimeoutMs = 30_000
    @Option(help: "Threads of the servers h2load drives (nghttpd -n, apns-simulator --threads).") var serverThreads = 1

    static let teamID = "BENCHTEAM1"
    static let keyID = "BENCHKEY01"
    static let bundleID = "com.example.bench"
    static let deviceToken = String(repeating: "a1b2c3d4", count: 8)
    static let payload = #"{"aps":{},"callId":"1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b","caller":{"handle":"driver-1234","displayName":"Driver Tanaka"},"hasVideo":false}"#

    /// The simulator and our client run on separate event loop groups, as if in separate processes
    /// (h2load and nghttpd are): on NIO's shared group both ends of one connection can land on the
    /// same thread, and the client would be measured sharing a core with the server it drives.
    static let simulatorGroup = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
    static let clientGroup = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)

    func run() async throws {
        var logger = Logger(label: "callpush-bench.apns")
        logger.logLevel = .error
        let key = P256.Signing.PrivateKey()
        var simulatorConfiguration = APNSSimulatorConfiguration()
        simulatorConfiguration.adminPort = nil
        simulatorConfiguration.tokenKeys = [.init(teamID: Self.teamID, keyID: Self.keyID, publicKey: key.publicKey)]
        simulatorConfiguration.maxRecordedPushes = 1000
        let simulator = APNSSimulator(configuration: simulatorConfiguration, logger: logger, eventLoopGroup: Self.simulatorGroup)
        try await simulator.start()
        print("simulator on 127.0.0.1:\(simulator.port); \(pushes) pushes per run, \(concurrency) in flight")

        var rows: [BenchmarkRow] = []
        await simulator.stop()
        if let burst {
            for count in connections {
                let simulator = APNSSimulator(configuration: simulatorConfiguration, logger: logger, eventLoopGroup: Self.simulatorGroup)
                try await simulator.start()
                try await measureBurst(burst, connections: count, simulator: simulator, key: key, logger: logger)
                await simulator.stop()
            }
            return
        }
        for count in connections {
            // A fresh simulator per client: a new client signs a new JWT for the same key, which a simulator that
            // already accepted one (like APNs) rejects for 20 minutes with TooManyProviderTokenUpdates.
            let simulator = APNSSimulator(configuration: simulatorConfiguration, logger: logger, eventLoopGroup: Self.simulatorGroup)
            try await simulator.start()
            let row = try await measureClient(connections: count, simulator: simulator, key: key, logger: logger)
            await simulator.stop()
            rows.append(row)
            print(row.formatted)
        }

        if !skipPeers {
            rows += await runPeers()
        }

        print("\n" + BenchmarkRow.header)
        for row in rows { print(row.formatted) }
        let ours1 = rows.first { $0.name == "callpush client" && $0.connections == 1 }
        let oursBest = rows.filter { $0.name == "callpush client" }.max { $0.rate < $1.rate }
        let h2loadSim1 = rows.first { $0.name == "h2load -> simulator" && $0.connections == 1 }
        let h2loadNghttpd1 = rows.first { $0.name == "h2load -> nghttpd" && $0.connections == 1 }
        if let ours1, let h2loadSim1 {
            print(String(format: "ours/h2load (1 connection): %.2f (target >= 0.25)", ours1.rate / h2loadSim1.rate))
        }
        if let oursBest, let h2loadSim1 {
            print(String(format: "ours best (%d connections)/h2load (1 connection): %.2f", oursBest.connections, oursBest.rate / h2loadSim1.rate))
        }
        if let h2loadSim1, let h2loadNghttpd1 {
            print(String(format: "simulator/nghttpd under h2load (1 connection): %.2f (target >= 0.5)", h2loadSim1.rate / h2loadNghttpd1.rate))
        }
        let h2loadSim4 = rows.first { $0.name == "h2load -> simulator" && $0.connections == 4 }
        let h2loadNghttpd4 = rows.first { $0.name == "h2load -> nghttpd" && $0.connections == 4 }
        if let h2loadSim4, let h2loadNghttpd4 {
            print(String(format: "simulator/nghttpd under h2load (4 connections): %.2f (target >= 0.5)", h2loadSim4.rate / h2loadNghttpd4.rate))
        }
        let ours4 = rows.first { $0.name == "callpush client" && $0.connections == 4 }
        if let ours4, let h2loadSim4 {
            print(String(format: "ours/h2load (4 connections): %.2f (target >= 0.25)", ours4.rate / h2loadSim4.rate))
        }
        if let aioapns = rows.first(where: { $0.name == "aioapns -> simulator" }), let ours1 {
            print(String(format: "ours (1 connection)/aioapns: %.1f", ours1.rate / aioapns.rate))
        }
    }

    /// One burst of `count` concurrent pushes through one client: outcome codes, connections, latency.
    private func measureBurst(_ count: Int, connections: Int, simulator: APNSSimulator, key: P256.Signing.PrivateKey, logger: Logger) async throws {
        let client = try makeClient(connections: connections, simulator: simulator, key: key, logger: logger)
        let push = APNSVoIPPush(app: "bench", deviceToken: Self.deviceToken, environment: .sandbox, payload: ByteBuffer(string: Self.payload))
        _ = await client.send(push)  // connections up
        let start = ContinuousClock.now
        let outcomes = await withTaskGroup(of: APNSOutcome.self) { group in
            for _ in 0..<count {
                group.addTask {
                    var push = push
                    push.apnsID = UUID.randomVersion4()
                    return await client.send(push)
                }
            }
            return await group.reduce(into: [APNSOutcome]()) { $0.append($1) }
        }
        let elapsed = ContinuousClock.now - start
        await client.shutdown()
        let codes = Dictionary(grouping: outcomes, by: \.code).mapValues(\.count).sorted { $0.key < $1.key }
        let latencies = outcomes.map { $0.latency.inSeconds * 1000 }.sorted()
        let stats = simulator.stats()
        print(String(format: "burst %d, %d connections, deadline %d ms: %.2f s, p50 %.0f ms, max %.0f ms", count, connections,
                     requestTimeoutMs, elapsed.inSeconds, latencies.isEmpty ? 0 : latencies[latencies.count / 2], latencies.last ?? 0))
        print("  outcomes: \(codes.map { "\($0.key)=\($0.value)" }.joined(separator: " ")); retried: \(outcomes.filter { $0.attempts > 1 }.count)")
        print("  simulator: accepted \(stats.accepted), connections opened \(stats.connectionsOpened), GOAWAYs \(stats.goAwaysSent)")
    }

    private func makeClient(connections: Int, simulator: APNSSimulator, key: P256.Signing.PrivateKey, logger: Logger) throws -> APNSClient {
        var configuration = APNSClientConfiguration.localSimulator(port: simulator.port, caCertificatePEM: simulator.caCertificatePEM)
        configuration.connectionsPerPool = connections
        configuration.maxQueuedRequestsPerPool = max(concurrency, burst ?? 0) * 2
        configuration.requestTimeout = .milliseconds(requestTimeoutMs)
        let signingKey = try APNSSigningKey(privateKey: key, keyID: Self.keyID, teamID: Self.teamID)
        return try APNSClient(
            configuration: configuration,
            apps: ["bench": APNSApp(bundleID: Self.bundleID, credentials: .token(signingKey))],
            eventLoopGroup: Self.clientGroup,
            logger: logger)
    }

    private func measureClient(connections: Int, simulator: APNSSimulator, key: P256.Signing.PrivateKey, logger: Logger) async throws -> BenchmarkRow {
        let client = try makeClient(connections: connections, simulator: simulator, key: key, logger: logger)
        let payload = ByteBuffer(string: Self.payload)
        let push = APNSVoIPPush(app: "bench", deviceToken: Self.deviceToken, environment: .sandbox, payload: payload)

        _ = await drive(client: client, push: push, total: min(pushes, 5_000))  // warm-up: connections, HPACK, JIT-free caches
        let start = ContinuousClock.now
        let result = await drive(client: client, push: push, total: pushes)
        let elapsed = ContinuousClock.now - start
        await client.shutdown()
        return BenchmarkRow(
            name: "callpush client", connections: connections, requests: pushes, failures: result.failures,
            seconds: elapsed.inSeconds, p50: result.percentile(0.50), p99: result.percentile(0.99))
    }

    /// Runs `total` pushes with `concurrency` workers; returns latencies (ms) and failures.
    private func drive(client: APNSClient, push: APNSVoIPPush, total: Int) async -> LatencySample {
        await driveConcurrently(total: total, workers: concurrency) {
            var push = push
            push.apnsID = UUID.randomVersion4()
            let outcome = await client.send(push)
            return outcome.isSent ? outcome.latency.inSeconds * 1000 : nil
        }
    }
}

/// Runs `total` sends on `workers` concurrent tasks; `send` returns its latency in ms, or `nil` for a failure.
func driveConcurrently(total: Int, workers: Int, _ send: @escaping @Sendable () async -> Double?) async -> LatencySample {
    let next = SharedCounter()
    let workers = max(1, min(workers, total))
    return await withTaskGroup(of: LatencySample.self) { group in
        for _ in 0..<workers {
            group.addTask {
                var sample = LatencySample()
                sample.latencies.reserveCapacity(total / workers + 1)
                while next.next() < total {
                    if let latency = await send() { sample.latencies.append(latency) } else { sample.failures += 1 }
                }
                return sample
            }
        }
        var merged = LatencySample()
        for await sample in group {
            merged.latencies += sample.latencies
            merged.failures += sample.failures
        }
        return merged
    }
}

extension APNSBenchmark {
    /// h2load and aioapns against a simulator with the same configuration, and h2load against nghttpd,
    /// via `SimulatorPeers` (the simulator helper's runners). Each peer failure is printed, not fatal.
    func runPeers() async -> [BenchmarkRow] {
        var rows: [BenchmarkRow] = []
        for clients in [1, 4] {
            let load = SimulatorPeers.Load(
                requests: pushes, clients: clients, streamsPerClient: max(1, concurrency / clients), threads: 1,
                warmUpRequests: min(pushes, 20_000), serverThreads: serverThreads)
            for (name, run) in [
                ("h2load -> simulator", { try await SimulatorPeers.h2loadAgainstSimulator(load) }),
                ("h2load -> nghttpd", { try await SimulatorPeers.h2loadAgainstNghttpd(load) }),
            ] as [(String, () async throws -> SimulatorPeers.H2LoadFigures)] {
                do {
                    let figures = try await run()
                    let row = BenchmarkRow(
                        name: name, connections: clients, requests: figures.requests, failures: figures.requests - figures.status2xx,
                        seconds: figures.seconds, p50: figures.p50Milliseconds, p99: figures.p99Milliseconds)
                    print(row.formatted)
                    rows.append(row)
                } catch {
                    print("\(name) (\(clients) connections) failed: \(error)")
                }
            }
        }
        do {
            let figures = try await SimulatorPeers.aioapnsAgainstSimulator(count: min(pushes, 20_000), concurrency: min(concurrency, 500))
            let row = BenchmarkRow(
                name: "aioapns -> simulator", connections: 0, requests: figures.pushes, failures: figures.pushes - figures.accepted,
                seconds: figures.seconds, p50: nil, p99: nil)
            print(row.formatted)
            rows.append(row)
        } catch {
            print("aioapns failed: \(error)")
        }
        return rows
    }
}

/// A counter shared by worker tasks.
final class SharedCounter: Sendable {
    private let value = Atomic<Int>(0)
    /// Returns the value before incrementing.
    func next() -> Int { value.wrappingAdd(1, ordering: .relaxed).oldValue }
}

/// Latencies in milliseconds plus a failure count.
struct LatencySample: Sendable {
    var latencies: [Double] = []
    var failures = 0

    func percentile(_ p: Double) -> Double? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }
}

/// One line of the result table.
struct BenchmarkRow: Sendable {
    var name: String
    var connections: Int
    var requests: Int
    var failures: Int
    var seconds: Double
    var p50: Double?
    var p99: Double?

    var rate: Double { seconds > 0 ? Double(requests - failures) / seconds : 0 }

    static let header = "tool                        conns   requests  failed      req/s   p50 ms   p99 ms"

    var formatted: String {
        func ms(_ value: Double?) -> String { value.map { String(format: "%8.2f", $0) } ?? "       -" }
        return name.padding(toLength: 28, withPad: " ", startingAt: 0)
            + String(format: "%5d %10d %7d %10.0f ", connections, requests, failures, rate) + ms(p50) + " " + ms(p99)
    }
}


