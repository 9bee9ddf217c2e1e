import CallpushTestSupport
import Foundation

/// deploy/kubernetes (the kustomization's resources), run as a cluster would run its pods: the
/// Secrets with their placeholders generated, ConfigMaps and Secrets mounted as the kubelet lays
/// them out, each Deployment's replicas with the pod's user, groups, read-only root and
/// environment (service links included), the probes and the Prometheus annotations checked
/// against the programs, and one call rung through each dispatch pod, as a backend would, seen
/// `sent` at the APNs simulator standing in for Apple.
struct KubernetesRun {
    let run: DeployRun
    /// Apple's host names: the worker's default endpoints, answered by the simulator.
    static let apnsHosts = ["api.push.apple.com", "api.sandbox.push.apple.com"]

    struct Pod {
        var name: String
        var deployment: DeployValue
        var container: ContainerSpec
        var containerPorts: [String: Int]
        var spec: DeployValue { deployment["spec"]["template"]["spec"] }
        var containerValue: DeployValue { spec["containers"].array[0] }
    }

    func execute() async throws {
        try await run.checkReferences()
        let kubernetes = run.deploy.appendingPathComponent("kubernetes")
        let kustomization = try await DeployDocuments.load(deploy: kubernetes, files: ["kustomization.yaml"])["kustomization.yaml"]?.first
        let resources = try kustomization.orThrow("no kustomization.yaml")["resources"].strings
        let objects = try await DeployDocuments.load(deploy: kubernetes, files: resources).sorted { $0.key < $1.key }.flatMap(\.value)
        func all(_ kind: String) -> [DeployValue] { objects.filter { $0["kind"].string == kind } }
        func named(_ kind: String, _ name: String) throws -> DeployValue {
            try all(kind).first { $0["metadata"]["name"].string == name }.orThrow("no \(kind) \(name) in the kustomization")
        }

        // The Secrets, placeholders generated; the ConfigMaps as they are.
        let generated = try await SecretFiles.generate(all("Secret"), apps: appNames(all("ConfigMap")), run: run)
        var volumeData: [String: [String: Data]] = generated.files
        for configMap in all("ConfigMap") {
            volumeData["configMap/" + configMap["metadata"]["name"].string!] = configMap["data"].object.compactMapValues { $0.string.map { Data($0.utf8) } }
        }

        // Kafka's place (before the pods, whose Kafka settings point at it): as many brokers as
        // the KafkaTopics want replicas.
        let kafkaTopics = all("KafkaTopic")
        _ = try run.startCluster(brokers: max(1, kafkaTopics.compactMap { $0["spec"]["replicas"].int }.max() ?? 1))

        // Apple's place: the simulator, with a certificate for Apple's host names.
        let simulatorAddress = run.newAddress()
        let deployments = all("Deployment")
        var pods: [Pod] = []
        let serviceLinks = self.serviceLinks(all("Service"))
        for deployment in deployments {
            for _ in 0..<(deployment["spec"]["replicas"].int ?? 1) {
                pods.append(try pod(deployment, volumeData: volumeData, serviceLinks: serviceLinks, apns: simulatorAddress))
            }
        }
        let (simulator, appleCA) = try await startSimulator(address: simulatorAddress, pods: pods)
        defer { simulator.signal(SIGKILL) }
        for index in pods.indices { pods[index].container.trustedCA = appleCA }

        // Topics: the KafkaTopics, checked against what `callpush topics create` makes.
        try await createTopics(kafkaTopics, kubernetes: kubernetes, worker: pods.first { $0.container.target == "push-worker" })

        // The pods, then their probes and metrics.
        for pod in pods {
            try await run.start(pod.container, grace: .seconds(pod.spec["terminationGracePeriodSeconds"].int ?? 30))
        }
        for pod in pods {
            for probe in ["startupProbe", "readinessProbe"] where !pod.containerValue[probe].isNull {
                try await run.waitForOK(try probeURL(pod, probe), what: "pod \(pod.name) \(probe)")
            }
        }
        for pod in pods where !pod.containerValue["livenessProbe"].isNull {
            let url = try probeURL(pod, "livenessProbe")
            guard let answer = await DeployRun.get(url), answer.status == 200 else { throw DeployRunFailure("pod \(pod.name) livenessProbe: GET \(url) did not answer 200") }
        }
        run.note("kubernetes: \(pods.count) pods (\(deployments.map { "\($0["metadata"]["name"].string!) ×\($0["spec"]["replicas"].int ?? 1)" }.joined(separator: ", "))) "
                 + "ready by their readinessProbes; livenessProbes answer 200")

        try await ring(pods: pods, services: all("Service"), apps: appNames(all("ConfigMap")), apiKeyFile: generated.apiKeyFile, simulator: simulatorAddress)
        try await scrape(pods)
        let inFlight = try await ringSlowly(pods: pods, apps: appNames(all("ConfigMap")), apiKeyFile: generated.apiKeyFile, simulator: simulatorAddress)
        try await run.stopAll(atOnce: true)
        try await expectSent(inFlight, after: "every pod got SIGTERM")
        try run.checkLogs()
    }

    /// Apple answers slowly (4 s, under the worker's 5 s APNs timeout and drain bound); one call
    /// is rung and left in flight: the simulator holds its push, unanswered. Returns its call id.
    func ringSlowly(pods: [Pod], apps: [String], apiKeyFile: String, simulator: String) async throws -> String {
        let faults = #"{"latency": {"shape": "fixed", "minimumMilliseconds": 4000, "maximumMilliseconds": 4000}}"#
        guard let answer = await DeployRun.get("http://\(simulator):2198/admin/faults", method: "PUT", body: faults), answer.status == 200 else {
            throw DeployRunFailure("the APNs simulator refused the latency fault")
        }
        let dispatch = try pods.first { $0.container.target == "dispatch" }.orThrow("no dispatch pod")
        let port = try dispatch.containerPorts["http"].orThrow("dispatch has no containerPort named http")
        let callID = UUID().uuidString.lowercased(), token = DeployRun.randomHex(32)
        let sent = try await ChildProcess.run(ChildProcess.productsDirectory.appendingPathComponent("callpush").path,
                                              ["send", "--url", "http://\(dispatch.container.address):\(port)", "--api-key-file", apiKeyFile,
                                               "--app", apps[0], "--environment", "production", "--token", token, "--call-id", callID],
                                              environment: ["PATH": DockerfileFacts.basePath], timeout: .seconds(30))
        guard sent.status == 0 else { throw DeployRunFailure("the slow call was not accepted: \(sent.stdout) \(sent.stderr)") }
        let held = await run.wait(upTo: .seconds(30)) {
            await DeployRun.get("http://\(simulator):2198/admin/pushes?token=\(token)")?.body.contains(token) == true
        }
        guard held else { throw DeployRunFailure("the slow call's push did not reach the simulator\n\(run.logTails())") }
        return callID
    }

    /// The call's status history (read from the status topic after the pods are gone) ends `sent`.
    func expectSent(_ callID: String, after what: String) async throws {
        let cluster = try run.cluster.orThrow("no cluster")
        let status = try await ChildProcess.run(ChildProcess.productsDirectory.appendingPathComponent("callpush").path,
                                                ["status", callID, "--json", "--bootstrap", cluster.bootstrapServers],
                                                environment: ["PATH": DockerfileFacts.basePath], timeout: .seconds(60))
        guard status.status == 0, status.stdout.contains("\"state\":\"sent\"") else {
            throw DeployRunFailure("a call in flight when \(what) did not end `sent` (status \(status.status)): \(status.stdout.suffix(600)) \(status.stderr.suffix(300))\n\(run.logTails())")
        }
        run.note("kubernetes: a call whose push Apple held for 4 s when \(what) ended `sent`: the worker drained it and wrote its outcome before exiting")
    }

    func appNames(_ configMaps: [DeployValue]) throws -> [String] {
        for configMap in configMaps {
            if let apps = configMap["data"]["apps.json"].string,
               let object = try? JSONSerialization.jsonObject(with: Data(apps.utf8)) as? [String: Any] { return object.keys.sorted() }
        }
        throw DeployRunFailure("no ConfigMap holds apps.json")
    }

    /// The environment the kubelet adds for every Service of the namespace (enableServiceLinks,
    /// on by default) and for the API server; the addresses are made up (nothing listens there).
    func serviceLinks(_ services: [DeployValue]) -> [(String, String)] {
        var links: [(String, String)] = []
        func add(_ name: String, _ ip: String, _ ports: [DeployValue]) {
            let prefix = name.uppercased().replacingOccurrences(of: "-", with: "_")
            guard let first = ports.first?["port"].int else { return }
            links += [("\(prefix)_SERVICE_HOST", ip), ("\(prefix)_SERVICE_PORT", "\(first)"), ("\(prefix)_PORT", "tcp://\(ip):\(first)")]
            for port in ports {
                guard let number = port["port"].int else { continue }
                let proto = (port["protocol"].string ?? "TCP")
                if let portName = port["name"].string { links.append(("\(prefix)_SERVICE_PORT_\(portName.uppercased().replacingOccurrences(of: "-", with: "_"))", "\(number)")) }
                let base = "\(prefix)_PORT_\(number)_\(proto)"
                links += [(base, "\(proto.lowercased())://\(ip):\(number)"), (base + "_PROTO", proto.lowercased()), (base + "_PORT", "\(number)"), (base + "_ADDR", ip)]
            }
        }
        add("kubernetes", "10.96.0.1", [.object(["name": .string("https"), "port": .number(443)])])
        for (index, service) in services.enumerated() where service["spec"]["clusterIP"].string != "None" {
            add(service["metadata"]["name"].string ?? "", "10.96.0.\(10 + index)", service["spec"]["ports"].array)
        }
        return links
    }

    /// One pod of `deployment` as its template describes it.
    func pod(_ deployment: DeployValue, volumeData: [String: [String: Data]], serviceLinks: [(String, String)], apns: String) throws -> Pod {
        let template = deployment["spec"]["template"]["spec"]
        let containers = template["containers"].array
        guard containers.count == 1, template["initContainers"].isNull else { throw DeployRunFailure("the run handles pods of one container") }
        let container = containers[0]
        let supported: Set<String> = ["name", "image", "ports", "env", "readinessProbe", "livenessProbe", "startupProbe", "resources",
                                      "securityContext", "volumeMounts", "command", "args", "imagePullPolicy", "workingDir"]
        if let extra = container.object.keys.first(where: { !supported.contains($0) }) { throw DeployRunFailure("container field \(extra) is not supported by the run") }
        guard let image = container["image"].string, let target = run.dockerfile.target(ofImage: image) else {
            throw DeployRunFailure("\(deployment["metadata"]["name"].string ?? ""): image \(container["image"].string ?? "") is not built by the Dockerfile")
        }
        let name = "\(deployment["metadata"]["name"].string!)-\(DeployRun.randomHex(5).prefix(10))-\(DeployRun.randomHex(3).prefix(5))"
        let address = run.newAddress()

        var environment = run.dockerfile.environment(target).sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        environment.append(("HOSTNAME", name))
        if template["enableServiceLinks"] != .bool(false) { environment += serviceLinks }
        for variable in container["env"].array {
            let key = variable["name"].string!
            if let value = variable["value"].string {
                environment.append((key, expand(value, environment)))
            } else if let field = variable["valueFrom"]["fieldRef"]["fieldPath"].string {
                let values = ["metadata.name": name, "metadata.namespace": deployment["metadata"]["namespace"].string ?? "default", "status.podIP": address]
                environment.append((key, try values[field].orThrow("fieldRef \(field) is not supported by the run")))
            } else if variable["valueFrom"].isNull {
                environment.append((key, ""))
            } else {
                throw DeployRunFailure("env \(key): valueFrom other than fieldRef is not supported by the run")
            }
        }

        let security = template["securityContext"], containerSecurity = container["securityContext"]
        let (imageUID, imageGID) = try run.dockerfile.user(target)
        let uid = containerSecurity["runAsUser"].int ?? security["runAsUser"].int ?? imageUID
        let gid = containerSecurity["runAsGroup"].int ?? security["runAsGroup"].int ?? imageGID
        let fsGroup = security["fsGroup"].int
        if (containerSecurity["runAsNonRoot"] == .bool(true) || security["runAsNonRoot"] == .bool(true)) && uid == 0 {
            throw DeployRunFailure("\(name): runAsNonRoot, but the container would run as root (the kubelet refuses to start it)")
        }
        let command = container["command"].isNull ? run.dockerfile.entrypoint(target) : container["command"].strings
        var spec = ContainerSpec(name: name, hostname: name, address: address, target: target,
                                 argv: command + container["args"].strings.map { expand($0, environment) },
                                 environment: environment, uid: uid, gid: gid,
                                 supplementaryGroups: ([fsGroup].compactMap { $0 } + security["supplementalGroups"].array.compactMap(\.int)),
                                 readOnlyRootFilesystem: containerSecurity["readOnlyRootFilesystem"] == .bool(true),
                                 noNewPrivileges: containerSecurity["allowPrivilegeEscalation"] == .bool(false),
                                 dropAllCapabilities: containerSecurity["capabilities"]["drop"].strings.contains("ALL"),
                                 workdir: container["workingDir"].string ?? run.dockerfile.workdir(target),
                                 hosts: [(address, [name]), (apns, Self.apnsHosts)])

        let volumes = Dictionary(template["volumes"].array.map { ($0["name"].string ?? "", $0) }, uniquingKeysWith: { first, _ in first })
        for mount in container["volumeMounts"].array {
            guard mount["subPath"].isNull else { throw DeployRunFailure("volumeMount subPath is not supported by the run") }
            let volumeName = mount["name"].string ?? ""
            let volume = try volumes[volumeName].orThrow("\(name): volumeMount \(volumeName) has no volume")
            let path = try SecretFiles.lay(volume: volume, podName: name, data: volumeData, fsGroup: fsGroup, run: run)
            spec.mounts.append(.init(containerPath: mount["mountPath"].string ?? "", hostPath: path, readOnly: mount["readOnly"] == .bool(true)))
        }
        try run.pointAtEmbeddedKafka(&spec)
        run.bindToOwnAddress(&spec)
        var ports: [String: Int] = [:]
        for port in container["ports"].array { if let number = port["containerPort"].int { ports[port["name"].string ?? "\(number)"] = number } }
        return Pod(name: name, deployment: deployment, container: spec, containerPorts: ports)
    }

    /// `$(VAR)` references expanded from the variables defined before, as the kubelet does.
    func expand(_ value: String, _ environment: [(String, String)]) -> String {
        var result = value
        for match in value.matches(of: /\$\(([A-Za-z_][A-Za-z0-9_]*)\)/) {
            if let defined = environment.last(where: { $0.0 == String(match.1) }) { result = result.replacingOccurrences(of: String(match.0), with: defined.1) }
        }
        return result
    }

    func probeURL(_ pod: Pod, _ probe: String) throws -> String {
        let get = pod.containerValue[probe]["httpGet"]
        guard !get.isNull, get["host"].isNull, get["httpHeaders"].isNull else { throw DeployRunFailure("\(probe): only httpGet probes without host or headers are supported by the run") }
        let port: Int
        if let number = get["port"].int { port = number } else {
            port = try pod.containerPorts[get["port"].string ?? ""].orThrow("\(pod.name) \(probe): port \(get["port"].string ?? "") is not a named containerPort")
        }
        return "\((get["scheme"].string ?? "HTTP").lowercased())://\(pod.container.address):\(port)\(get["path"].string ?? "/")"
    }

    /// The APNs simulator on Apple's port, with a CA added to every pod's trust store (as Apple's
    /// root is in the image's), and the token keys of the apps the pods would sign with.
    func startSimulator(address: String, pods: [Pod]) async throws -> (ServerProcess, ca: String) {
        let directory = run.directory.appendingPathComponent("apns")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let names = Self.apnsHosts.map { "DNS:\($0)" }.joined(separator: ",")
        _ = try await run.shell("""
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -keyout ca-key.pem -out ca.pem \
              -subj '/CN=deploy run stand-in for Apple' -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign' 2>/dev/null
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server-key.pem -out server.csr -subj '/CN=api.push.apple.com' 2>/dev/null
            printf 'subjectAltName=\(names)\\nextendedKeyUsage=serverAuth\\n' > server.ext
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 -extfile server.ext -out server.pem 2>/dev/null
            cat server.pem ca.pem > server-chain.pem
            """, in: directory)
        let ca = try String(contentsOf: directory.appendingPathComponent("ca.pem"), encoding: .utf8)
        var keys: [String] = []
        for pod in pods where pod.container.target == "push-worker" {
            guard let appsPath = pod.container.value("CALLPUSH_APPS_FILE"), let apps = try? hostPath(appsPath, in: pod.container),
                  let object = try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: apps))) as? [String: [String: String]] else { continue }
            for app in object.values where app["auth"] == "token" {
                if let team = app["teamId"], let key = app["keyId"], let file = app["keyFile"], let path = try? hostPath(file, in: pod.container) {
                    keys += ["--token-key", "\(team):\(key):\(path)"]
                }
            }
            break
        }
        let process = try await ServerProcess("apns-simulator", ["--host", address, "--port", "443", "--admin-port", "2198",
                                                           "--cert", directory.appendingPathComponent("server-chain.pem").path,
                                                           "--key", directory.appendingPathComponent("server-key.pem").path,
                                                           "--environment", "production", "--log-level", "warning"] + keys,
                                        environment: ["PATH": DockerfileFacts.basePath])
        let ready = await process.wait(upTo: .seconds(30)) { await DeployRun.get("http://\(address):2198/admin/stats") != nil }
        guard ready else { throw DeployRunFailure("the APNs simulator did not start: \(process.stderrTail())") }
        return (process, ca)
    }

    /// The host file a container path of `spec` is mounted from.
    func hostPath(_ path: String, in spec: ContainerSpec) throws -> String {
        let mount = try spec.mounts.filter { path.hasPrefix($0.containerPath.hasSuffix("/") ? $0.containerPath : $0.containerPath + "/") }
            .max { $0.containerPath.count < $1.containerPath.count }.orThrow("\(path) is on no volume of \(spec.name)")
        return mount.hostPath + "/" + path.dropFirst(mount.containerPath.count).drop { $0 == "/" }
    }

    /// The KafkaTopics against `callpush topics create` as kafka-topics.yaml documents it (with the
    /// worker's Kafka settings and secrets): the topics it would make must be the KafkaTopics;
    /// then the KafkaTopics are created as Strimzi's Topic Operator would, and the command finds them.
    func createTopics(_ kafkaTopics: [DeployValue], kubernetes: URL, worker: Pod?) async throws {
        let worker = try worker.orThrow("no push-worker Deployment")
        let text = try String(contentsOf: kubernetes.appendingPathComponent("kafka-topics.yaml"), encoding: .utf8)
        let command = try text.firstMatch(of: /`(callpush topics create[^`]*)`/).map { String($0.1) }
            .orThrow("kafka-topics.yaml documents no `callpush topics create …` for clusters without Strimzi")
        var job = worker.container
        job.name = "topics-create"
        job.target = "callpush"
        job.argv = run.dockerfile.entrypoint("callpush") + command.split(separator: " ").dropFirst().map(String.init)
        job.environment = job.environment.filter { !$0.0.hasPrefix("CALLPUSH_") || $0.0.hasPrefix("CALLPUSH_KAFKA_") || $0.0.hasPrefix("CALLPUSH_TOPIC_") }
        job.address = run.newAddress()
        var mismatches: [String] = []
        _ = try await run.createTopics(job) { planned in
            for topic in planned {
                guard let resource = kafkaTopics.first(where: { ($0["spec"]["topicName"].string ?? $0["metadata"]["name"].string) == topic.name }) else {
                    mismatches.append("no KafkaTopic for \(topic.name)")
                    continue
                }
                let spec = resource["spec"]
                if spec["partitions"].int != topic.partitions { mismatches.append("KafkaTopic \(topic.name): partitions \(spec["partitions"].int ?? 0), `\(command)` makes \(topic.partitions)") }
                if spec["replicas"].int != topic.replication { mismatches.append("KafkaTopic \(topic.name): replicas \(spec["replicas"].int ?? 0), `\(command)` makes \(topic.replication)") }
                for (key, value) in topic.configs where spec["config"][key].string != value {
                    mismatches.append("KafkaTopic \(topic.name): config \(key) \(spec["config"][key].string ?? "unset"), `\(command)` sets \(value)")
                }
            }
            guard mismatches.isEmpty else { throw DeployRunFailure(mismatches.joined(separator: "\n")) }
            for resource in kafkaTopics {
                try run.cluster!.createTopic(resource["spec"]["topicName"].string ?? resource["metadata"]["name"].string!,
                                             partitions: resource["spec"]["partitions"].int ?? 1, replicationFactor: resource["spec"]["replicas"].int ?? 1)
            }
        }
        run.note("the KafkaTopics are what `\(command)` makes (partitions, replicas, retention.ms, min.insync.replicas)")
    }

    /// One call through each dispatch pod, as a backend in the cluster calls the `dispatch`
    /// Service (its targetPort), with the API key whose hash the generated keys file holds.
    func ring(pods: [Pod], services: [DeployValue], apps: [String], apiKeyFile: String, simulator: String) async throws {
        let service = try services.first { $0["metadata"]["name"].string == "dispatch" }.orThrow("no dispatch Service")
        let targetPort = service["spec"]["ports"].array.first?["targetPort"]
        for pod in pods where pod.container.target == "dispatch" {
            let port = try (targetPort?.int ?? pod.containerPorts[targetPort?.string ?? ""]).orThrow("Service dispatch: targetPort is not a port of \(pod.name)")
            let token = DeployRun.randomHex(32)
            let result = try await ChildProcess.run(ChildProcess.productsDirectory.appendingPathComponent("callpush").path,
                                                    ["send", "--url", "http://\(pod.container.address):\(port)", "--api-key-file", apiKeyFile,
                                                     "--app", apps[0], "--environment", "production", "--token", token, "--wait"],
                                                    environment: ["PATH": DockerfileFacts.basePath], timeout: .seconds(90))
            guard result.status == 0, result.stdout.contains("\"state\":\"sent\"") else {
                throw DeployRunFailure("ringing through \(pod.name): status \(result.status): \(result.stdout.suffix(600)) \(result.stderr.suffix(600))\n\(run.logTails())")
            }
            let pushes = await DeployRun.get("http://\(simulator):2198/admin/pushes?token=\(token)")
            guard let pushes, pushes.body.contains(token) else { throw DeployRunFailure("the simulator has no push for the call rung through \(pod.name)") }
        }
        run.note("kubernetes: one call through each dispatch pod (Service dispatch → targetPort, API key of the generated keys file) ended `sent`; "
                 + "the simulator on api.push.apple.com:443 has each push")
    }

    /// Prometheus scrapes what each pod's annotations say.
    func scrape(_ pods: [Pod]) async throws {
        for pod in pods {
            let annotations = pod.deployment["spec"]["template"]["metadata"]["annotations"]
            guard annotations["prometheus.io/scrape"].string == "true" else { continue }
            let url = "http://\(pod.container.address):\(annotations["prometheus.io/port"].string ?? "")\(annotations["prometheus.io/path"].string ?? "/metrics")"
            guard let answer = await DeployRun.get(url), answer.status == 200, answer.body.contains("callpush_") else {
                throw DeployRunFailure("pod \(pod.name): Prometheus annotations point at \(url), which serves no callpush metrics")
            }
        }
        run.note("kubernetes: every pod's prometheus.io annotations reach its /metrics")
    }
}
