import Foundation

/// A long-running child process (a service under test): stdout and stderr go to files the
/// test can read at any time (for a ready line, or to explain a failure), the exit status is
/// awaited with a bound, and the process is killed when the test drops it.
public final class ServerProcess: Sendable {
    private let child: SpawnedProcess
    private let directory: URL

    /// Starts `executable` (a product name resolves next to the test bundle).
    public init(_ executable: String, _ arguments: [String] = [], environment: [String: String]? = nil) async throws {
        let path = executable.contains("/") ? executable : ChildProcess.productsDirectory.appendingPathComponent(executable).path
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        child = try await SpawnedProcess.start(path, arguments, environment: environment.map(ChildProcess.withSanitizerSettings),
                                               stdout: directory.appendingPathComponent("stdout").path,
                                               stderr: directory.appendingPathComponent("stderr").path)
    }

    deinit {
        child.signal(SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }

    public var processIdentifier: pid_t { child.pid }
    public var isRunning: Bool { child.isRunning }
    public var stdout: String { (try? String(contentsOf: directory.appendingPathComponent("stdout"), encoding: .utf8)) ?? "" }
    public var stderr: String { (try? String(contentsOf: directory.appendingPathComponent("stderr"), encoding: .utf8)) ?? "" }

    /// Whether the running process has a shared library whose file name starts with `name` mapped
    /// (`/proc/PID/maps`; false where there is none), e.g. `libjemalloc.so`.
    public func mapsLibrary(_ name: String) -> Bool {
        // `/proc` files report no size: read to the end rather than `String(contentsOfFile:)`.
        guard let file = FileHandle(forReadingAtPath: "/proc/\(child.pid)/maps") else { return false }
        defer { try? file.close() }
        let maps = String(decoding: (try? file.readToEnd()) ?? Data(), as: UTF8.self)
        return maps.split(separator: "\n").contains { $0.split(separator: "/").last?.hasPrefix(name) == true }
    }

    /// The last lines of stderr, for a failure message.
    public func stderrTail(lines: Int = 20) -> String {
        stderr.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    public func signal(_ signal: Int32) {
        child.signal(signal)
    }

    /// The exit status (the signal's number if a signal ended it), or nil if the process did not
    /// exit within `bound` (it is then killed).
    public func exitStatus(within bound: Duration) async -> Int32? {
        let stream = child.exit
        let status = await withTaskGroup(of: Int32?.self) { group in
            group.addTask { for await code in stream { return code }; return nil }
            group.addTask { try? await Task.sleep(for: bound); return nil }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
        if status == nil { signal(SIGKILL) }
        return status
    }

    /// The first line of stdout that contains `text` (a ready line), polled until it appears, the
    /// process exits, or `bound` passes (then nil).
    public func stdoutLine(containing text: String, within bound: Duration) async -> String? {
        var line: String?
        _ = await wait(upTo: bound, every: .milliseconds(50)) {
            line = stdout.split(separator: "\n").first { $0.contains(text) }.map(String.init)
            return line != nil
        }
        return line
    }

    /// Polls `check` until it holds, the process exits, or `bound` passes.
    public func wait(upTo bound: Duration, every interval: Duration = .milliseconds(100),
                     until check: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + bound
        while ContinuousClock.now < deadline {
            if await check() { return true }
            guard isRunning else { return await check() }
            try? await Task.sleep(for: interval)
        }
        return false
    }
}

/// TCP ports for servers started as child processes.
public enum TestPorts {
    /// A port that is free now, outside the kernel's ephemeral range (32768–60999 here), where
    /// the many outgoing connections and embedded brokers of a test run would collide with it.
    public static func free() -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 12_000...32_000)
            if canBind(port) { return port }
        }
        return Int.random(in: 12_000...32_000)
    }

    static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
