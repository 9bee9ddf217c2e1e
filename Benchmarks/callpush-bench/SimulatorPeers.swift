import APNsSimulator
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Peers the APNs benchmark measures against, in the same run:
/// (a) `h2load` against `nghttpd` (the C reference HTTP/2 server) with TLS,
/// (b) `h2load` against the APNs simulator with real VoIP requests (valid JWT, ~300-byte payload),
/// (c) the unmodified `aioapns` Python client against the simulator.
/// Figures only; nothing is asserted.
enum SimulatorPeers {
    /// What `h2load` reports, plus percentiles computed from its per-request log.
    struct H2LoadFigures: Sendable, CustomStringConvertible {
        var requests: Int
        var succeeded: Int
        var status2xx: Int
        var seconds: Double
        var requestsPerSecond: Double
        var p50Milliseconds: Double
        var p90Milliseconds: Double
        var p99Milliseconds: Double
        var maxMilliseconds: Double

        var description: String {
            String(
                format: "%d requests (%d 2xx) in %.2f s: %.0f req/s, latency p50 %.2f ms p90 %.2f ms p99 %.2f ms max %.2f ms",
                requests, status2xx, seconds, requestsPerSecond, p50Milliseconds, p90Milliseconds, p99Milliseconds,
                maxMilliseconds
            )
        }
    }

    /// What `send_voip.py` reports.
    struct AioapnsFigures: Sendable, CustomStringConvertible {
        var pushes: Int
        var accepted: Int
        var seconds: Double
        var pushesPerSecond: Double

        var description: String {
            String(format: "%d pushes (%d accepted) in %.2f s: %.0f pushes/s", pushes, accepted, seconds, pushesPerSecond)
        }
    }

    struct PeerError: Error, CustomStringConvertible {
        var description: String
    }

    /// The load shape shared by (a) and (b).
    struct Load: Sendable {
        var requests = 100_000
        var clients = 4
        var streamsPerClient = 100
        var threads = 1
        /// Requests of an unmeasured h2load run against the same server first (warm caches, heap and
        /// connections' first JWT check), the same for every server.
        var warmUpRequests = 0
        /// Threads of the server under load: nghttpd's `-n` and the simulator executable's `--threads`
        /// (1 = both serve from one thread, nghttpd's default; the other core is h2load's).
        var serverThreads = 1
    }

    static let deviceToken = String(repeating: "a1", count: 32)
    static let topic = "com.example.callpush.voip"

    /// A VoIP payload of about 300 bytes, like callpush sends.
    static let payload: String = {
        let base = #"{"aps":{},"callId":"1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b","handle":"driver-1234","handleType":"generic","displayName":"Driver Tanaka","hasVideo":false,"ringDeadline":"2026-11-21T12:00:30.000Z","attributes":{"rideId":"R-829"},"ack":""#
        return base + String(repeating: "k", count: max(0, 298 - base.utf8.count)) + #""}"#
    }()

    // MARK: (a) nghttpd

    /// Starts `nghttpd` with TLS on a free port (generated certificate), runs `h2load` POSTing the VoIP payload, stops it.
    /// `path`/`answer`: the file nghttpd serves (an empty answer at the APNs path by default); `body` and `headers`
    /// are what h2load POSTs.
    static func h2loadAgainstNghttpd(
        _ load: Load = Load(), path: String = "/3/device/\(deviceToken)", answer: String = "", body: String = payload,
        headers: [String] = voipHeaders(jwt: nil)
    ) async throws -> H2LoadFigures {
        let server = try await Nghttpd.start(path: path, answer: answer, threads: load.serverThreads)
        defer { server.stop() }
        return try await h2load(port: server.port, headers: headers, load: load, directory: server.directory, path: path, body: body)
    }

    /// A running `nghttpd` serving one file (`answer` at `path`) with TLS on a free port.
    struct Nghttpd {
        let process: Process
        let port: Int
        let directory: String
        /// The CA of its generated certificate.
        let caCertificatePEM: String

        static func start(path: String, answer: String, threads: Int) async throws -> Nghttpd {
            let directory = try temporaryDirectory("nghttpd")
            let identity = try GeneratedTLSIdentity.generate()
            try identity.certificateChainPEM.write(toFile: "\(directory)/cert.pem", atomically: true, encoding: .utf8)
            try identity.privateKeyPEM.write(toFile: "\(directory)/key.pem", atomically: true, encoding: .utf8)
            let file = "\(directory)/root" + path
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try answer.write(toFile: file, atomically: true, encoding: .utf8)
            let port = try freePort()
            let server = Process()
            server.executableURL = URL(fileURLWithPath: try which("nghttpd"))
            server.arguments = ["-n", String(threads), "-d", "\(directory)/root", String(port), "\(directory)/key.pem", "\(directory)/cert.pem"]
            server.standardOutput = FileHandle.nullDevice
            server.standardError = FileHandle.nullDevice
            try server.run()
            let running = Nghttpd(process: server, port: port, directory: directory, caCertificatePEM: identity.caCertificatePEM)
            do {
                try await waitUntilListening(port: port, process: server)
            } catch {
                running.stop()
                throw error
            }
            return running
        }

        func stop() {
            // nghttpd ignores SIGTERM while serving; SIGKILL it so waitUntilExit cannot hang.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    // MARK: (b) simulator

    /// The `apns-simulator` executable next to this benchmark (`swift build -c release` builds both), if any.
    static var simulatorExecutable: String? {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let candidate = directory.appendingPathComponent("apns-simulator").path
        return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
    }

    /// Starts a simulator (production environment, fault-free, a valid JWT), runs `h2load` with VoIP requests,
    /// stops it. Like nghttpd, the simulator runs as its own process (the `apns-simulator` executable) when it
    /// was built next to the benchmark, so the two servers are measured alike; otherwise in this process.
    static func h2loadAgainstSimulator(_ load: Load = Load()) async throws -> H2LoadFigures {
        let key = APNSSimulatorTestKey()
        let directory = try temporaryDirectory("h2load-sim")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let headers = voipHeaders(jwt: try key.providerToken())
        if let executable = simulatorExecutable {
            let keyPath = "\(directory)/key.pem"
            try key.privateKeyPEM.write(toFile: keyPath, atomically: true, encoding: .utf8)
            let outputPath = "\(directory)/simulator.out"
            _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = [
                "--port", "0", "--no-admin", "--environment", "production", "--max-recorded", "10000",
                "--token-key", "\(key.teamID):\(key.keyID):\(keyPath)", "--log-level", "warning", "--threads", String(load.serverThreads),
            ]
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
            process.standardError = FileHandle.nullDevice
            try process.run()
            defer {
                process.terminate()
                process.waitUntilExit()
            }
            let port = try await readyPort(outputPath: outputPath, process: process)
            return try await h2load(port: port, headers: headers, load: load, directory: directory)
        }
        var configuration = APNSSimulatorConfiguration()
        configuration.adminPort = nil
        configuration.environment = .production
        configuration.tokenKeys = [key.tokenKey]
        configuration.maxRecordedPushes = 10_000
        var logger = Logger(label: "callpush-bench.simulator")
        logger.logLevel = .warning
        let simulator = APNSSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        do {
            let figures = try await h2load(port: simulator.port, headers: headers, load: load, directory: directory)
            await simulator.stop()
            return figures
        } catch {
            await simulator.stop()
            throw error
        }
    }

    /// The port in `apns-simulator ready: https://host:PORT …`.
    static func readyPort(outputPath: String, process: Process) async throws -> Int {
        for _ in 0..<1000 {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.contains("ready: https://") }),
                let url = line.split(separator: " ").first(where: { $0.hasPrefix("https://") }),
                let port = url.split(separator: ":").last.flatMap({ Int($0.prefix { $0.isNumber }) })
            {
                return port
            }
            guard process.isRunning else { throw PeerError(description: "apns-simulator exited at start: \(text)") }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw PeerError(description: "apns-simulator did not print its ready line within 10 s")
    }

    // MARK: (c) aioapns

    /// Runs `Tests/APNsSimulatorTests/aioapns/send_voip.py` (unmodified aioapns) for `count` pushes against a
    /// fresh simulator.
    static func aioapnsAgainstSimulator(count: Int = 5_000, concurrency: Int = 100, script: String? = nil) async throws -> AioapnsFigures {
        let scriptPath = script ?? defaultScriptPath
        let key = APNSSimulatorTestKey()
        var configuration = APNSSimulatorConfiguration()
        configuration.adminPort = nil
        configuration.tokenKeys = [key.tokenKey]
        var logger = Logger(label: "callpush-bench.simulator")
        logger.logLevel = .warning
        let simulator = APNSSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        let directory = try temporaryDirectory("aioapns")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            try simulator.writeCACertificate(to: "\(directory)/ca.pem")
            try key.privateKeyPEM.write(toFile: "\(directory)/key.p8", atomically: true, encoding: .utf8)
            let output = try await run(try which("python3"), [
                scriptPath, "--port", String(simulator.port), "--ca", "\(directory)/ca.pem", "--key", "\(directory)/key.p8",
                "--key-id", key.keyID, "--team-id", key.teamID, "--topic", topic, "--token", deviceToken,
                "--count", String(count), "--concurrency", String(concurrency),
            ], timeout: 600)
            await simulator.stop()
            guard let line = output.stdout.split(separator: "\n").last,
                let json = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let seconds = json["seconds"] as? Double, let accepted = json["ok"] as? Int
            else {
                throw PeerError(description: "send_voip.py failed (\(output.status)): \(output.stdout) \(output.stderr)")
            }
            return AioapnsFigures(pushes: count, accepted: accepted, seconds: seconds, pushesPerSecond: Double(count) / seconds)
        } catch {
            await simulator.stop()
            throw error
        }
    }

    static var defaultScriptPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tests/APNsSimulatorTests/aioapns/send_voip.py").path
    }

    // MARK: h2load

    static func voipHeaders(jwt: String?) -> [String] {
        var headers = [
            "apns-push-type: voip", "apns-topic: \(topic)", "apns-priority: 10", "apns-expiration: 0",
            "content-type: application/json",
        ]
        if let jwt { headers.append("authorization: bearer \(jwt)") }
        return headers
    }

    /// Runs h2load (POST of ``payload``) and parses its summary and per-request log.
    static func h2load(
        port: Int, headers: [String], load: Load, directory: String, path: String = "/3/device/\(deviceToken)", body: String = payload
    ) async throws -> H2LoadFigures {
        if load.warmUpRequests > 0 {
            var warmUp = load
            warmUp.requests = load.warmUpRequests
            warmUp.warmUpRequests = 0
            _ = try await h2load(port: port, headers: headers, load: warmUp, directory: directory, path: path, body: body)
        }
        let bodyPath = "\(directory)/payload.json"
        let logPath = "\(directory)/h2load.log"
        try body.write(toFile: bodyPath, atomically: true, encoding: .utf8)
        var arguments = [
            "-n", String(load.requests), "-c", String(load.clients), "-m", String(load.streamsPerClient),
            "-t", String(load.threads), "-d", bodyPath, "--log-file", logPath,
        ]
        for header in headers { arguments += ["-H", header] }
        arguments.append("https://127.0.0.1:\(port)" + path)
        let output = try await run(try which("h2load"), arguments, timeout: 600)
        guard output.status == 0 else {
            throw PeerError(description: "h2load failed (\(output.status)): \(output.stderr)")
        }
        return try parse(summary: output.stdout, log: (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")
    }

    static func parse(summary: String, log: String) throws -> H2LoadFigures {
        func number(after marker: String, in line: Substring) -> Double? {
            guard let range = line.range(of: marker) else { return nil }
            let tail = line[range.upperBound...].drop { $0 == " " }
            return Double(tail.prefix { $0.isNumber || $0 == "." })
        }
        var figures = H2LoadFigures(
            requests: 0, succeeded: 0, status2xx: 0, seconds: 0, requestsPerSecond: 0,
            p50Milliseconds: 0, p90Milliseconds: 0, p99Milliseconds: 0, maxMilliseconds: 0
        )
        for line in summary.split(separator: "\n") {
            if line.hasPrefix("finished in") {
                let secondsText = line.dropFirst("finished in ".count).prefix { $0.isNumber || $0 == "." }
                let value = Double(secondsText) ?? 0
                figures.seconds = line.contains("ms,") ? value / 1000 : value
                figures.requestsPerSecond = number(after: ",", in: line) ?? 0
            } else if line.hasPrefix("requests:") {
                figures.requests = Int(number(after: "requests:", in: line) ?? 0)
                figures.succeeded = Int(number(after: "done,", in: line) ?? 0)
            } else if line.hasPrefix("status codes:") {
                figures.status2xx = Int(number(after: "status codes:", in: line) ?? 0)
            }
        }
        guard figures.requests > 0 else { throw PeerError(description: "cannot parse h2load output: \(summary)") }
        // Log columns: start (µs since epoch), status, duration (µs).
        var durations = log.split(separator: "\n").compactMap { line -> Double? in
            let columns = line.split(separator: "\t")
            return columns.count >= 3 ? Double(columns[2]) : nil
        }
        durations.sort()
        if !durations.isEmpty {
            func percentile(_ p: Double) -> Double {
                durations[min(durations.count - 1, Int(Double(durations.count) * p))] / 1000
            }
            figures.p50Milliseconds = percentile(0.5)
            figures.p90Milliseconds = percentile(0.9)
            figures.p99Milliseconds = percentile(0.99)
            figures.maxMilliseconds = (durations.last ?? 0) / 1000
        }
        return figures
    }

    // MARK: Processes

    struct ProcessOutput {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func run(
        _ executable: String, _ arguments: [String], timeout: TimeInterval, environment: [String: String]? = nil
    ) async throws -> ProcessOutput {
        let directory = try temporaryDirectory("run")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = FileManager.default.createFile(atPath: "\(directory)/out", contents: nil)
        _ = FileManager.default.createFile(atPath: "\(directory)/err", contents: nil)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(directory)/out"))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(directory)/err"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardOutput = out
        process.standardError = err
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
                return
            }
            let pid = process.processIdentifier
            Task {
                try? await Task.sleep(for: .seconds(timeout))
                kill(pid, SIGKILL)
            }
        }
        try? out.close()
        try? err.close()
        return ProcessOutput(
            status: status,
            stdout: (try? String(contentsOfFile: "\(directory)/out", encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: "\(directory)/err", encoding: .utf8)) ?? ""
        )
    }

    static func which(_ name: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in (path + ":/usr/sbin:/usr/local/bin").split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw PeerError(description: "\(name) not found on PATH (apt-get install nghttp2-client nghttp2-server python3)")
    }

    static func temporaryDirectory(_ prefix: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A port that was free a moment ago (nghttpd cannot report an ephemeral port).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw PeerError(description: "socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else { throw PeerError(description: "bind() failed") }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw PeerError(description: "getsockname() failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// nghttpd prints nothing when it is ready (only with -v, which would slow it down), so connect with
    /// growing back-off, bounded to 5 s.
    static func waitUntilListening(port: Int, process: Process) async throws {
        var delay = Duration.milliseconds(5)
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            guard process.isRunning else { throw PeerError(description: "nghttpd exited at start") }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            close(fd)
            if connected == 0 { return }
            try await Task.sleep(for: delay)
            delay = min(delay * 2, .milliseconds(200))
        }
        throw PeerError(description: "nghttpd did not listen on port \(port) within 5 s")
    }
}
