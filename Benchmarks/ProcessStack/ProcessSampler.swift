import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A process's resident memory, open file descriptors and CPU time, read from `/proc`.
public struct ProcessSample: Sendable {
    public var rssKiB: Int
    public var fds: Int
    /// User plus system CPU time of every thread of the process so far (`utime + stime` of
    /// `/proc/PID/stat`), in seconds.
    public var cpuSeconds: Double

    /// `nil` when the process is gone.
    public static func read(pid: Int32) -> ProcessSample? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        var rss = 0
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            rss = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
        return ProcessSample(rssKiB: rss, fds: fds, cpuSeconds: cpuSeconds(pid: pid) ?? 0)
    }

    /// `utime + stime` of `pid` in seconds, `nil` when the process is gone. Reads only
    /// `/proc/PID/stat` (cheap enough to sample often).
    public static func cpuSeconds(pid: Int32) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // After the command name (which may contain spaces): state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
