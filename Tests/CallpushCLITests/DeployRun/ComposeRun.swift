import Foundation

/// deploy/compose/compose.yaml, run as `docker compose up` would run it, then the call its header
/// comment documents (`docker compose run --rm cli send … --wait`), seen `sent` at the simulator.
struct ComposeRun {
    let run: DeployRun
    static let file = "compose/compose.yaml"
    /// A service that others wait for with `service_completed_successfully`.
    private static let completed = "service_completed_successfully"

    func execute() async throws {
        try await run.checkReferences()
        let compose = try (try await DeployDocuments.load(deploy: run.deploy, files: [Self.file])[Self.file]?.first).orThrow("\(Self.file) holds no document")
        let services = compose["services"].object
        let composeDirectory = run.deploy.appendingPathComponent("compose")
        try checkPublishedPorts(services)

        // Kafka's place: the embedded cluster answers where the Kafka service advertises itself.
        let kafka = services.filter { $0.value["image"].string?.hasPrefix("apache/kafka") == true }
        let advertised = Set(kafka.values.flatMap { ($0["environment"]["KAFKA_ADVERTISED_LISTENERS"].string ?? "").split(separator: ",") }
            .compactMap { $0.split(separator: "/").last.map(String.init) })
        _ = try run.startCluster(brokers: max(1, kafka.count))

        var addresses: [String: String] = [:]
        for name in services.keys.sorted() { addresses[name] = run.newAddress() }
        let hosts = addresses.sorted { $0.key < $1.key }.map { ($0.value, [$0.key]) }
        let volumes = try namedVolumes(compose, services: services)
        let oneShots = Set(services.values.flatMap { $0["depends_on"].object.filter { $0.value["condition"].string == Self.completed }.map { $0.key } })

        func spec(_ name: String, command override: [String]? = nil) throws -> (ContainerSpec, grace: Duration) {
            let service = services[name]!
            guard let image = service["image"].string, let target = run.dockerfile.target(ofImage: image) else {
                throw DeployRunFailure("compose service \(name): image \(service["image"].string ?? "none") is not built by the Dockerfile")
            }
            let entrypoint = try service["entrypoint"].isNull ? run.dockerfile.entrypoint(target) : service["entrypoint"].strings.map(interpolate)
            let command = try override ?? service["command"].strings.map(interpolate)
            var environment = run.dockerfile.environment(target).sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            environment.append(("HOSTNAME", String(DeployRun.randomHex(6))))
            for (key, value) in service["environment"].object.sorted(by: { $0.key < $1.key }) {
                environment.append((key, try interpolate(value.string ?? "")))
            }
            let (uid, gid) = try run.dockerfile.user(target)
            var spec = ContainerSpec(name: name, hostname: environment.first { $0.0 == "HOSTNAME" }!.1, address: addresses[name]!, target: target,
                                     argv: entrypoint + command, environment: environment, uid: uid, gid: gid,
                                     readOnlyRootFilesystem: service["read_only"] == .bool(true), workdir: run.dockerfile.workdir(target), hosts: hosts)
            for volume in service["volumes"].strings {
                let parts = volume.split(separator: ":").map(String.init)
                guard parts.count >= 2 else { throw DeployRunFailure("compose service \(name): volume \(volume) has no container path") }
                let source = parts[0].hasPrefix(".") || parts[0].hasPrefix("/")
                    ? composeDirectory.appendingPathComponent(parts[0]).standardizedFileURL.path
                    : try volumes[parts[0]].orThrow("compose service \(name): volume \(parts[0]) is not declared under volumes:")
                spec.mounts.append(.init(containerPath: parts[1], hostPath: source, readOnly: parts.dropFirst(2).contains("ro")))
            }
            if let bootstrap = spec.value("CALLPUSH_KAFKA_BOOTSTRAP") {
                for broker in bootstrap.split(separator: ",") where !advertised.contains(String(broker)) {
                    throw DeployRunFailure("compose service \(name): CALLPUSH_KAFKA_BOOTSTRAP names \(broker), which the Kafka service does not advertise (\(advertised.sorted()))")
                }
            }
            try run.pointAtEmbeddedKafka(&spec)
            run.bindToOwnAddress(&spec)
            return (spec, try duration(service["stop_grace_period"].string ?? "10s"))
        }

        for name in try startOrder(services) where kafka[name] == nil && services[name]!["profiles"].isNull {
            let (container, grace) = try spec(name)
            if oneShots.contains(name) {
                if container.argv.dropFirst().starts(with: ["topics", "create"]) {
                    _ = try await run.createTopics(container) { topics in
                        for topic in topics { try run.cluster!.createTopic(topic.name, partitions: topic.partitions, replicationFactor: topic.replication) }
                    }
                } else {
                    let result = try await run.runToCompletion(container)
                    guard result.status == 0 else { throw DeployRunFailure("compose service \(name) exited with status \(result.status): \(result.stderr.suffix(600))") }
                    run.note("compose one-shot `\(name)` completed")
                }
            } else {
                try await run.start(container, grace: grace)
            }
        }
        try await waitUntilReady(services, addresses: addresses)
        try await ringAsTheHeaderSays(compose: composeDirectory.appendingPathComponent("compose.yaml"), services: services, addresses: addresses) { command in
            try spec("cli", command: command).0
        }
        try await run.stopAll(atOnce: false)
        try run.checkLogs()
    }

    /// Compose fails `up` when two services publish one host port.
    func checkPublishedPorts(_ services: [String: DeployValue]) throws {
        var owners: [Int: String] = [:]
        for (name, service) in services.sorted(by: { $0.key < $1.key }) where service["profiles"].isNull {
            for mapping in service["ports"].strings {
                guard let host = mapping.split(separator: ":").dropLast().last.flatMap({ Int($0) }) else { continue }
                if let other = owners[host] {
                    throw DeployRunFailure("compose: host port \(host) is published by both \(other) and \(name) (`docker compose up` fails: port is already allocated)")
                }
                owners[host] = name
            }
        }
    }

    /// A directory per named volume, owned as the image of its first user has that path (Docker
    /// fills a new named volume from the image).
    func namedVolumes(_ compose: DeployValue, services: [String: DeployValue]) throws -> [String: String] {
        var volumes: [String: String] = [:]
        for name in compose["volumes"].object.keys.sorted() {
            let directory = run.directory.appendingPathComponent("volumes/\(name)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var owner = (0, 0)
            for service in services.values {
                guard let image = service["image"].string, let target = run.dockerfile.target(ofImage: image),
                      let path = service["volumes"].strings.first(where: { $0.hasPrefix(name + ":") })?.split(separator: ":")[1] else { continue }
                owner = run.dockerfile.owner(target, of: String(path)) ?? owner
                break
            }
            chown(directory.path, uid_t(owner.0), gid_t(owner.1))
            chmod(directory.path, 0o755)
            volumes[name] = directory.path
        }
        return volumes
    }

    /// Services in an order that respects depends_on.
    func startOrder(_ services: [String: DeployValue]) throws -> [String] {
        var order: [String] = [], visiting: Set<String> = []
        func visit(_ name: String) throws {
            guard !order.contains(name) else { return }
            guard services[name] != nil else { throw DeployRunFailure("compose: depends_on names unknown service \(name)") }
            guard visiting.insert(name).inserted else { throw DeployRunFailure("compose: depends_on cycle at \(name)") }
            for dependency in services[name]!["depends_on"].object.keys.sorted() { try visit(dependency) }
            order.append(name)
        }
        for name in services.keys.sorted() { try visit(name) }
        return order
    }

    /// Every published port of a started service answers; dispatch and the workers serve
    /// `/readyz` on each port they publish, and it must say ready.
    func waitUntilReady(_ services: [String: DeployValue], addresses: [String: String]) async throws {
        for (spec, _, _) in run.running {
            for mapping in services[spec.name]!["ports"].strings {
                guard let port = mapping.split(separator: ":").last.flatMap({ Int($0.split(separator: "/")[0]) }) else { continue }
                let path = ["dispatch", "push-worker"].contains(spec.target) ? "/readyz" : "/admin/stats"
                try await run.waitForOK("http://\(spec.address):\(port)\(path)", what: "compose service \(spec.name), published port \(mapping)")
            }
        }
        run.note("compose: every published port answers; dispatch and both workers are ready (/readyz 200)")
    }

    /// The header's `docker compose … run --rm cli …` command, its words as a shell makes them,
    /// run in the `cli` service; it must end `sent`, and the simulator must have the push.
    func ringAsTheHeaderSays(compose: URL, services: [String: DeployValue], addresses: [String: String],
                             cli: ([String]) throws -> ContainerSpec) async throws {
        let header = try String(contentsOf: compose, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            .prefix { $0.hasPrefix("#") || $0.isEmpty }.map { $0.drop { $0 == "#" || $0 == " " } }
        let joined = header.joined(separator: "\n").replacingOccurrences(of: "\\\n", with: " ")
        guard let line = joined.split(separator: "\n").first(where: { $0.contains("run --rm cli ") }),
              let range = line.range(of: "run --rm cli ") else {
            throw DeployRunFailure("compose.yaml: the header documents no `docker compose run --rm cli …` call")
        }
        let words = try await run.shell("set -- \(line[range.upperBound...]); printf '%s\\n' \"$@\"", in: run.directory)
            .split(separator: "\n").map(String.init)
        let container = try cli(words)
        let result = try await run.runToCompletion(container, bound: .seconds(90))
        guard result.status == 0, result.stdout.contains("\"state\":\"sent\"") else {
            throw DeployRunFailure("the header's `cli \(words.joined(separator: " "))` ended with status \(result.status): \(result.stdout.suffix(800)) \(result.stderr.suffix(800))\n\(run.logTails())")
        }
        let token = try words.firstIndex(of: "--token").map { words[$0 + 1] }.orThrow("the documented call has no --token")
        guard let simulator = services.first(where: { $0.value["image"].string.flatMap(run.dockerfile.target(ofImage:)) == "apns-simulator" && $0.value["entrypoint"].isNull }),
              let admin = simulator.value["command"].strings.split(separator: "--admin-port").dropFirst().first?.first else {
            throw DeployRunFailure("compose: no apns-simulator service with --admin-port")
        }
        let pushes = await DeployRun.get("http://\(addresses[simulator.key]!):\(admin)/admin/pushes?token=\(token)")
        guard let pushes, pushes.status == 200, pushes.body.contains(token) else {
            throw DeployRunFailure("the simulator has no push to the documented call's token: \(pushes.map { "\($0.status) \($0.body.prefix(300))" } ?? "no answer")")
        }
        run.note("the header's `docker compose run --rm cli \(words.prefix(4).joined(separator: " ")) …` rang through dispatch and ended `sent`; "
                 + "the simulator's /admin/pushes has the push")
    }

    /// Compose's interpolation: `$$` is a literal `$`; host variables are not part of this run.
    func interpolate(_ text: String) throws -> String {
        let escaped = text.replacingOccurrences(of: "$$", with: "\u{0}")
        if escaped.contains(/\$[{A-Za-z_]/) { throw DeployRunFailure("compose: `\(text.prefix(60))` interpolates a host variable; the run has none") }
        return escaped.replacingOccurrences(of: "\u{0}", with: "$")
    }

    /// A compose duration (`30s`, `1m30s`, `500ms`).
    func duration(_ text: String) throws -> Duration {
        var total = Duration.zero
        for match in text.matches(of: /(\d+)(ms|s|m|h)/) {
            let value = Int(match.1)!
            switch match.2 {
            case "ms": total += .milliseconds(value)
            case "s": total += .seconds(value)
            case "m": total += .seconds(value * 60)
            default: total += .seconds(value * 3600)
            }
        }
        return total
    }
}

extension Optional {
    func orThrow(_ message: String) throws -> Wrapped {
        guard let self else { throw DeployRunFailure(message) }
        return self
    }
}
