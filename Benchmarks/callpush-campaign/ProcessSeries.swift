import ProcessStack

/// Samples of one process over a soak, and the growth rule applied to them.
struct ProcessSeries: Sendable {
    var name: String
    var pid: Int32
    var samples: [(at: Double, sample: ProcessSample)] = []

    /// The rule: after warm-up, memory may not grow beyond 1.5 × the first post-warm-up sample
    /// + 16 MiB, and open fds beyond that sample + 16.
    func verdict(warmUp: Double) -> String? {
        guard let baseline = samples.first(where: { $0.at >= warmUp })?.sample, let end = samples.last?.sample else {
            return "\(name): no samples after warm-up"
        }
        var problems: [String] = []
        let rssLimit = Int(Double(baseline.rssKiB) * 1.5) + 16 * 1024
        if end.rssKiB > rssLimit { problems.append("RSS \(end.rssKiB) KiB > limit \(rssLimit) KiB") }
        if end.fds > baseline.fds + 16 { problems.append("fds \(end.fds) > \(baseline.fds) + 16") }
        return problems.isEmpty ? nil : "\(name): " + problems.joined(separator: ", ")
    }

    func line(warmUp: Double) -> String {
        let rss = samples.map(\.sample.rssKiB)
        let fds = samples.map(\.sample.fds)
        let baseline = samples.first(where: { $0.at >= warmUp })?.sample
        func mib(_ kib: Int?) -> String { kib.map { String(format: "%.1f", Double($0) / 1024) } ?? "-" }
        func pad(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }
        let name = self.name + String(repeating: " ", count: max(0, 16 - self.name.count))
        return name + pad(mib(rss.first), 7) + pad(mib(baseline?.rssKiB), 8) + pad(mib(rss.last), 8) + pad(mib(rss.max()), 8)
            + pad("\(fds.first ?? -1)", 11) + pad("\(baseline?.fds ?? -1)", 5) + pad("\(fds.last ?? -1)", 5) + pad("\(fds.max() ?? -1)", 6)
    }
}
