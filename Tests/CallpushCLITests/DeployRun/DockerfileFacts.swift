import Foundation

/// What deploy/docker/Dockerfile makes of each image target: its entrypoint, user, working
/// directory, environment and the programs it copies in, and the directories it prepares (a
/// named volume mounted there starts with that owner, as Docker copies it from the image).
struct DockerfileFacts {
    struct Stage {
        var parent: String?
        var user: String?
        var entrypoint: [String]?
        var workdir: String?
        var environment: [String: String] = [:]
        /// Container path -> built product name (`COPY --from=builder /out/X /app/X`).
        var programs: [String: String] = [:]
        /// Container directory -> (uid, gid) from `chown U:G DIR` in a RUN line.
        var owners: [String: (Int, Int)] = [:]
    }

    private(set) var stages: [String: Stage] = [:]
    /// Debian's PATH, the environment every image inherits from its base.
    static let basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    init(path: URL) throws {
        let text = try String(contentsOf: path, encoding: .utf8)
        // Join continuation lines.
        let lines = text.replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        var current: String?
        for line in lines where !line.hasPrefix("#") && !line.isEmpty {
            let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            switch words.first?.uppercased() {
            case "FROM":
                guard words.count >= 4, words[2].uppercased() == "AS" else { current = nil; continue }
                current = words[3]
                stages[words[3]] = Stage(parent: stages[words[1]] != nil ? words[1] : nil)
            case "USER": if let current { stages[current]?.user = words.dropFirst().first }
            case "WORKDIR": if let current { stages[current]?.workdir = words.dropFirst().first }
            case "ENV":
                if let current {
                    for pair in words.dropFirst() {
                        let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                        if parts.count == 2 { stages[current]?.environment[parts[0]] = parts[1] }
                    }
                }
            case "ENTRYPOINT":
                if let current, let data = line.dropFirst("ENTRYPOINT".count).data(using: .utf8),
                   let array = try? JSONSerialization.jsonObject(with: data) as? [String] {
                    stages[current]?.entrypoint = array
                }
            case "COPY":
                if let current, words.count == 4, words[1] == "--from=builder", words[2].hasPrefix("/out/") {
                    stages[current]?.programs[words[3]] = String(words[2].dropFirst("/out/".count))
                }
            case "RUN":
                if let current {
                    for match in line.matches(of: /chown\s+(\d+):(\d+)\s+(\/\S+)/) {
                        stages[current]?.owners[String(match.3)] = (Int(match.1)!, Int(match.2)!)
                    }
                }
            default: continue
            }
        }
    }

    /// A property of `target`, inherited from the stages it is built `FROM`.
    private func inherited<T>(_ target: String, _ property: (Stage) -> T?) -> T? {
        var name: String? = target
        while let stageName = name, let stage = stages[stageName] {
            if let value = property(stage) { return value }
            name = stage.parent
        }
        return nil
    }

    var targets: Set<String> { Set(stages.keys).subtracting(["builder", "runtime"]) }
    func entrypoint(_ target: String) -> [String] { inherited(target) { $0.entrypoint } ?? [] }
    func workdir(_ target: String) -> String { inherited(target) { $0.workdir } ?? "/" }
    /// The programs the image holds: container path -> built product.
    func programs(_ target: String) -> [String: String] {
        var programs: [String: String] = [:]
        var name: String? = target
        while let stageName = name, let stage = stages[stageName] {
            programs.merge(stage.programs) { newer, _ in newer }
            name = stage.parent
        }
        return programs
    }
    func owner(_ target: String, of directory: String) -> (Int, Int)? { inherited(target) { $0.owners[directory] } }

    /// The image's user as (uid, gid); root when the Dockerfile names none.
    func user(_ target: String) throws -> (Int, Int) {
        guard let user = inherited(target, { $0.user }) else { return (0, 0) }
        let parts = user.split(separator: ":").map { Int($0) }
        guard let uid = parts.first ?? nil else { throw DeployRunFailure("Dockerfile target \(target): USER \(user) is not numeric") }
        return (uid, parts.count > 1 ? (parts[1] ?? uid) : uid)
    }

    /// The image's environment: the base PATH and what the stages set.
    func environment(_ target: String) -> [String: String] {
        var chain: [Stage] = []
        var name: String? = target
        while let stageName = name, let stage = stages[stageName] { chain.insert(stage, at: 0); name = stage.parent }
        var environment = ["PATH": Self.basePath]
        for stage in chain { environment.merge(stage.environment) { _, new in new } }
        return environment
    }

    /// The image target of `callpush/<target>:<tag>`, if the Dockerfile builds it.
    func target(ofImage image: String) -> String? {
        let name = image.split(separator: ":").first.map(String.init) ?? image
        guard name.hasPrefix("callpush/") else { return nil }
        let target = String(name.dropFirst("callpush/".count))
        return targets.contains(target) ? target : nil
    }
}
