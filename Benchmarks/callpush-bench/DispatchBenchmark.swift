import APNsSimulator
import ArgumentParser
import CallContract
import DispatchService
import Foundation
import Kafka
import Logging
import ServiceLifecycle

/// dispatch on the embedded cluster, driven by `wrk`: `POST /v1/calls` (each request a new
/// callId, Kafka acknowledgement included) against the same server's `/healthz` (the HTTP
/// framework's ceiling here), both at saturation, then POST again with a think time per connection
/// at about half of the saturation rate for the p99/p50 ratio. wrk is closed-loop: a run's rate is
/// at most connections / latency, and a POST waits ~6–15 ms for Kafka's acknowledgement (5 ms of it
/// linger) while costing ~0.1 ms of CPU, so the saturation runs use 256 connections (enough for
/// ~17k–40k req/s at that latency); 64 measured the acknowledgement's latency instead of dispatch.
/// The key belongs to a tenant limited to the rung app, and every limit (connections, timeouts,
/// byte budgets, ack limits) is at its default; `--tls` serves HTTPS with a
/// generated certificate (dispatch's own TLS, as `CALLPUSH_DISPATCH_TLS_*_FILE` sets it up).
struct DispatchBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dispatch", abstract: "dispatch POST /v1/calls vs /healthz with wrk (prints figures).")

    @Option(help: "Seconds of each wrk run.") var seconds = 10
    @Option(help: "wrk connections of the saturation runs (POST needs rate × its latency of them; see the type's comment).") var connections = 256
    @Option(help: "wrk threads.") var threads = 2
    @Option(help: "Partitions of the requests and status topics.") var partitions = 6
    @Flag(help: "Serve HTTPS (a generated certificate) instead of plain HTTP.") var tls = false
    @Option(help: "A librdkafka property for dispatch's clients, key=value (repeatable), as CALLPUSH_KAFKA_<PROPERTY> sets them (e.g. linger.ms=5).")
    var kafkaProperty: [String] = []

    struct WrkResult {
        var rate: Double
        var p50: Double
        var p99: Double
        var errors: Int
        var line: String { String(format: "%10.0f %9.2f %9.2f %8d", rate, p50, p99, errors) }
    }

    func run() async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let cluster = try EmbeddedKafkaCluster(brokers: 3, logger: logger)
        for topic in [Topics.requests, Topics.status] { try cluster.createTopic(topic, partitions: partitions) }
        let key = APIKey.generatePlaintext()
        var properties: [String: String] = [:]
        for property in kafkaProperty {
            let parts = property.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw ValidationError("--kafka-property wants key=value, not \(property)") }
            properties[parts[0]] = parts[1]
        }
        var configuration = DispatchConfiguration(
            kafka: KafkaConfiguration(bootstrapServers: [cluster.bootstrapServers], clientID: "bench", properties: properties), apps: ["rider"],
            apiKeys: [APIKey(name: "bench", plaintext: key, ratePerSecond: 1_000_000, tenant: "bench", apps: ["rider"])],
            ackSecret: Array(repeating: 7, count: 32), instanceID: "dispatch-bench")
        configuration.host = "127.0.0.1"
        configuration.port = 0
        let certificates = FileManager.default.temporaryDirectory.appendingPathComponent("dispatch-bench-tls-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: certificates) }
        if tls {
            let identity = try GeneratedTLSIdentity.generate()
            try FileManager.default.createDirectory(at: certificates, withIntermediateDirectories: true)
            let chain = certificates.appendingPathComponent("chain.pem"), privateKey = certificates.appendingPathComponent("key.pem")
            try Data(identity.certificateChainPEM.utf8).write(to: chain)
            try Data(identity.privateKeyPEM.utf8).write(to: privateKey)
            configuration.tls = TLSFiles(certificateChain: chain.path, privateKey: privateKey.path)
        }
        let app = try DispatchApp(configuration: configuration, logger: logger)
        let group = ServiceGroup(services: app.services, logger: logger)
        let running = Task { try await group.run() }
        let port = await app.port()
        let script = try writeScript(key: key)
        defer { try? FileManager.default.removeItem(atPath: script) }
        let base = "\(tls ? "https" : "http")://127.0.0.1:\(port)"

        print("callpush-bench dispatch: wrk \(seconds) s per run, \(threads) threads, \(ProcessInfo.processInfo.activeProcessorCount) cores, "
              + "\(partitions) partitions, \(tls ? "HTTPS (dispatch's TLS)" : "plain HTTP"), tenant-scoped key, default limits"
              + (properties.isEmpty ? "" : ", Kafka " + properties.keys.sorted().map { "\($0)=\(properties[$0]!)" }.joined(separator: " ")))
        _ = try await wrk(url: base + "/v1/calls", connections: 8, seconds: 2, script: script)  // warm up: metadata, connections
        print("run                               req/s    p50 ms    p99 ms   non-2xx   CPU µs/req")
        // CPU of this process (dispatch and the embedded cluster, not wrk) per answered request: on a
        // shared machine the rates swing with other load, the CPU a request costs much less. The
        // per-thread split tells the embedded cluster's mock broker (never inside dispatch in
        // production) from dispatch's own threads.
        var cpu = Self.processCPUSeconds()
        var threadTicks = ThreadCPU.snapshot()
        let healthz = try await wrk(url: base + "/healthz", connections: connections, seconds: seconds, script: nil)
        let healthzCPU = Self.cpuPerRequest(since: &cpu, rate: healthz.rate, seconds: seconds)
        let healthzSplit = ThreadCPU.perRequest(since: &threadTicks, requests: healthz.rate * Double(seconds))
        print("GET /healthz        c=\(pad(connections)) " + healthz.line + String(format: " %12.1f", healthzCPU))
        print("  " + healthzSplit.line)
        let ring = try await wrk(url: base + "/v1/calls", connections: connections, seconds: seconds, script: script)
        let ringCPU = Self.cpuPerRequest(since: &cpu, rate: ring.rate, seconds: seconds)
        let ringSplit = ThreadCPU.perRequest(since: &threadTicks, requests: ring.rate * Double(seconds))
        print("POST /v1/calls      c=\(pad(connections)) " + ring.line + String(format: " %12.1f", ringCPU))
        print("  " + ringSplit.line)
        // Half of saturation: the same connections, each waiting a think time between its answer and its next
        // request (wrk's `delay()`, jittered ±50 %), so the offered rate is set by the think time rather than by
        // the server: about rate = connections / (think + latency). The think time is adjusted until the achieved
        // rate is within 10 % of half the saturation rate (at most 4 runs); the closest run is reported.
        let target = ring.rate / 2
        var half: (think: Double, result: WrkResult)?
        var think = max(0.5, Double(connections) / max(target, 1) * 1000 - 1)
        for _ in 0..<4 {
            let paced = try writeScript(key: key, thinkMilliseconds: think)
            defer { try? FileManager.default.removeItem(atPath: paced) }
            let result = try await wrk(url: base + "/v1/calls", connections: connections, seconds: seconds, script: paced)
            print("POST /v1/calls      c=\(pad(connections)) " + result.line + String(format: "   (think %.1f ms)", think))
            if half == nil || abs(result.rate - target) < abs(half!.result.rate - target) { half = (think, result) }
            if abs(result.rate - target) <= target * 0.1 || result.rate <= 0 { break }
            // rate ≈ connections / (think + latency): scale the whole cycle by achieved / target.
            let cycle = (think + max(result.p50, 0)) * result.rate / target
            think = max(0.1, cycle - max(result.p50, 0))
        }
        let sequential = try await wrk(url: base + "/v1/calls", connections: 1, seconds: seconds, script: script)
        print("POST /v1/calls      c=1    " + sequential.line + "   (one client, back to back)")
        print(String(format: "ratio POST/healthz = %.2f (target ≥ 0.25); CPU per request healthz/POST = %.2f "
                     + "(whole process), %.2f (dispatch's threads only, without the embedded cluster's mock broker)",
                     ring.rate / max(healthz.rate, 1), healthzCPU / max(ringCPU, 0.001),
                     healthzSplit.withoutCluster / max(ringSplit.withoutCluster, 0.001)))
        if let (think, result) = half {
            print(String(format: "at ~half of saturation (c=%d, think %.1f ms, %.0f req/s = %.2f× saturation): p99/p50 = %.1f (target < 10)",
                         connections, think, result.rate, result.rate / max(ring.rate, 1), result.p99 / max(result.p50, 0.001)))
        }
        await group.triggerGracefulShutdown()
        _ = await running.result
        await cluster.shutdown()
    }

    /// User + system CPU seconds of this process so far.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        #if os(Linux)
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Microseconds of process CPU per request since `cpu` (which moves to now).
    static func cpuPerRequest(since cpu: inout Double, rate: Double, seconds: Int) -> Double {
        let now = processCPUSeconds()
        defer { cpu = now }
        return (now - cpu) / max(rate * Double(seconds), 1) * 1e6
    }

    private func pad(_ n: Int) -> String { String(n).padding(toLength: 4, withPad: " ", startingAt: 0) }

    /// A wrk script POSTing a one-device ring with a fresh callId per request.
    /// With `thinkMilliseconds`, each connection waits that long (±50 %) after an answer before its next request.
    private func writeScript(key: String, thinkMilliseconds: Double? = nil) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("dispatch-bench-\(UUID().uuidString).lua").path
        let lua = """
        local counter = 0
        thread_id = 0
        local next_id = 0
        function setup(thread)
          next_id = next_id + 1
          thread:set("thread_id", next_id)
        end
        -- Seeded per run and thread: unseeded, every run would repeat the previous run's call ids,
        -- and the repeats would be answered from the idempotency store without reaching Kafka.
        function init(args)
          math.randomseed(os.time() * 1000 + thread_id * 7919 + math.floor(os.clock() * 1000000))
        end
        wrk.method = "POST"
        wrk.headers["Content-Type"] = "application/json"
        wrk.headers["Authorization"] = "Bearer \(key)"
        request = function()
          counter = counter + 1
          local id = string.format("%08x-%04x-4000-8000-%012x", math.random(0, 0x7fffffff), thread_id, counter)
          -- A device per request (rings of one device are rate-limited, as a harassment guard).
          local token = string.format("%08x%08x", thread_id, counter) .. string.rep("ab", 28)
          local body = '{"callId":"' .. id .. '","app":"rider","devices":[{"token":"' .. token ..
            '","environment":"sandbox"}],"caller":{"handle":"driver-1","displayName":"Driver"},"attributes":{"rideId":"R-1"}}'
          return wrk.format(nil, nil, nil, body)
        end
        """ + (thinkMilliseconds.map { think in
            """

            function delay()
              return \(think) * (0.5 + math.random())
            end
            """
        } ?? "")
        try Data(lua.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Runs wrk (without blocking a concurrency thread) and parses requests/s, the 50 % and 99 %
    /// latencies, and non-2xx answers.
    private func wrk(url: String, connections: Int, seconds: Int, script: String?) async throws -> WrkResult {
        var arguments = ["-t\(min(threads, connections))", "-c\(connections)", "-d\(seconds)s", "--latency", "--timeout", "10s"]
        if let script { arguments += ["-s", script] }
        let output = try await SimulatorPeers.run("/usr/bin/wrk", arguments + [url], timeout: TimeInterval(seconds + 30)).stdout
        func value(after prefix: String) -> String? {
            output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.hasPrefix(prefix) }
                .map { String($0.dropFirst(prefix.count)).trimmingCharacters(in: .whitespaces) }
        }
        func milliseconds(_ text: String?) -> Double {
            guard let text else { return -1 }
            for (unit, factor) in [("us", 0.001), ("ms", 1.0), ("s", 1000.0)] where text.hasSuffix(unit) {
                return (Double(text.dropLast(unit.count)) ?? -1) * factor
            }
            return -1
        }
        return WrkResult(rate: Double(value(after: "Requests/sec:") ?? "") ?? 0, p50: milliseconds(value(after: "50%")),
                         p99: milliseconds(value(after: "99%")), errors: Int(value(after: "Non-2xx or 3xx responses:") ?? "0") ?? 0)
    }
}

/// CPU time of this process's threads, grouped by thread name (Linux `/proc/self/task`), so a
/// figure can leave out the embedded cluster: librdkafka's mock cluster serves all its brokers on
/// one thread, `rdk:mock`. Threads that end between two snapshots are not counted (dispatch's
/// threads live for the whole run).
struct ThreadCPU {
    /// Microseconds of CPU per request by group.
    struct Split {
        var cluster = 0.0, librdkafka = 0.0, pollThreads = 0.0, eventLoops = 0.0, other = 0.0
        /// Everything but the embedded cluster's mock broker thread: dispatch's own cost.
        var withoutCluster: Double { librdkafka + pollThreads + eventLoops + other }
        var line: String {
            String(format: "CPU µs/req: embedded cluster (rdk:mock) %.1f | dispatch %.1f = librdkafka clients %.1f "
                   + "+ Kafka poll threads %.1f + NIO event loops %.1f + Swift tasks and other threads %.1f",
                   cluster, withoutCluster, librdkafka, pollThreads, eventLoops, other)
        }
    }

    /// Ticks (user + system) by thread id, with the thread's name.
    static func snapshot() -> [String: (name: String, ticks: Int)] {
        var threads: [String: (name: String, ticks: Int)] = [:]
        guard let ids = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return threads }
        for id in ids {
            guard let stat = try? String(contentsOfFile: "/proc/self/task/\(id)/stat", encoding: .utf8),
                  let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { continue }
            let name = String(stat[stat.index(after: open)..<close])
            // After the name: state, ppid, … utime and stime are fields 14 and 15 of the whole line.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { continue }
            threads[id] = (name, user + system)
        }
        return threads
    }

    /// CPU per request by group since `previous` (which moves to now).
    static func perRequest(since previous: inout [String: (name: String, ticks: Int)], requests: Double) -> Split {
        let now = snapshot()
        defer { previous = now }
        let microsecondsPerTick = 1e6 / Double(sysconf(Int32(_SC_CLK_TCK)))
        var split = Split()
        for (id, thread) in now {
            let ticks = Double(thread.ticks - (previous[id]?.ticks ?? 0)) * microsecondsPerTick / max(requests, 1)
            if thread.name.hasPrefix("rdk:mock") {
                split.cluster += ticks
            } else if thread.name.hasPrefix("rdk:") {
                split.librdkafka += ticks
            } else if thread.name.hasPrefix("kafka-") {
                split.pollThreads += ticks
            } else if thread.name.hasPrefix("NIO-") {
                split.eventLoops += ticks
            } else {
                split.other += ticks
            }
        }
        return split
    }
}
