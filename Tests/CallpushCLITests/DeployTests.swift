import CallpushTestSupport
import Foundation
import Testing
import DispatchService

/// deploy/: every YAML/JSON file parses and the files agree with each other and with the
/// programs' sources (deploy/tools/check_deploy.py, PyYAML). Docker is not available here, so
/// the images are not built; this checks the references.
@Suite struct DeployFiles {
    static let script = ChildProcess.repositoryRoot.appendingPathComponent("deploy/tools/check_deploy.py").path

    func check(deploy: String? = nil) async throws -> ChildProcess.Output {
        let python = try #require(ChildProcess.findExecutable("python3"), "python3 (scripts/install-deps)")
        var arguments = [Self.script, "--root", ChildProcess.repositoryRoot.path]
        if let deploy { arguments += ["--deploy", deploy] }
        return try await ChildProcess.run(python, arguments, environment: ProcessInfo.processInfo.environment, timeout: .seconds(60))
    }

    @Test func everyFileParsesAndEveryReferenceHolds() async throws {
        let result = try await check()
        #expect(!result.stderr.contains("No module named 'yaml'"), "install python3-yaml (scripts/install-deps)")
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains(": OK"))
    }

    /// Runs the check on a copy of deploy/ with `edits` (file → replacements) applied.
    func checkEdited(_ edits: [String: [(String, String)]]) async throws -> ChildProcess.Output {
        let copy = try DeployDocuments.editedCopy(of: ChildProcess.repositoryRoot.appendingPathComponent("deploy"), edits)
        defer { try? FileManager.default.removeItem(at: copy) }
        return try await check(deploy: copy.path)
    }

    @Test func aBrokenReferenceIsCaught() async throws {
        let result = try await checkEdited([
            "kubernetes/push-worker.yaml": [
                ("CALLPUSH_MAX_IN_FLIGHT", "CALLPUSH_MAX_INFLIGHT"),
                ("terminationGracePeriodSeconds: 45", "terminationGracePeriodSeconds: 10"),
                ("image: callpush/push-worker:0.1.0", "image: callpush/pusher:0.1.0"),
                ("            - name: CALLPUSH_GROUP_ID\n",
                 "            - name: CALLPUSH_GROUP_INSTANCE_ID\n              valueFrom:\n                fieldRef:\n                  fieldPath: metadata.name\n"
                 + "            - name: CALLPUSH_GROUP_ID\n"),
            ],
            "prometheus/callpush-alerts.yaml": [("callpush_worker_dead_letters_total", "callpush_worker_dlq_total")],
            "compose/compose.yaml": [("stop_grace_period: 30s", "stop_grace_period: 20s"),
                                     ("CALLPUSH_WORKER_ID: push-worker-1\n", "CALLPUSH_WORKER_ID: push-worker-1\n      CALLPUSH_GROUP_INSTANCE_ID: push-worker-1\n")],
        ])
        #expect(result.status == 1)
        #expect(result.stdout.contains("CALLPUSH_MAX_INFLIGHT is not read by any program"))
        #expect(result.stdout.contains("terminationGracePeriodSeconds (10000 ms) must exceed"))
        #expect(result.stdout.contains("image callpush/pusher:0.1.0 is not built"))
        #expect(result.stdout.contains("metric callpush_worker_dlq_total is not exported"))
        #expect(result.stdout.contains("service push-worker-2: stop_grace_period (20000 ms) must exceed the drain bound (5000 ms)"))
        #expect(result.stdout.contains("service push-worker-1: CALLPUSH_GROUP_INSTANCE_ID (static membership)"))
        #expect(result.stdout.contains("CALLPUSH_GROUP_INSTANCE_ID (static membership) needs identities that survive a replacement"))
    }

    @Test func exposingMoreThanTheAckRouteOrReadableSecretsIsCaught() async throws {
        let result = try await checkEdited(["kubernetes/dispatch.yaml": [
            ("          - path: /v1/calls/[0-9a-fA-F-]{36}/ack$", "          - path: /v1"),
            ("            defaultMode: 0400\n", ""),
            ("              value: \"9090\"", "              value: \"-1\""),
        ]])
        #expect(result.status == 1)
        #expect(result.stdout.contains("publishes /v1: only /v1/calls/<id>/ack may face the internet"))
        #expect(result.stdout.contains("secret volume api-keys needs defaultMode 0400"))
        #expect(result.stdout.contains("CALLPUSH_DISPATCH_METRICS_PORT must give /metrics its own port"))
    }

    /// deploy/tools/validate_kubernetes.py on `deploy` (the shipped files when nil).
    func validate(deploy: String? = nil) async throws -> ChildProcess.Output {
        let python = try #require(ChildProcess.findExecutable("python3"), "python3 (scripts/install-deps)")
        let script = ChildProcess.repositoryRoot.appendingPathComponent("deploy/tools/validate_kubernetes.py").path
        return try await ChildProcess.run(python, [script] + (deploy.map { ["--deploy", $0] } ?? []),
                                          environment: ProcessInfo.processInfo.environment, timeout: .seconds(180))
    }

    /// The manifests against the Kubernetes API schemas (oldest and newest version
    /// kubernetes-validate knows, unknown fields refused) and KEDA's CRDs, offline.
    @Test func theManifestsValidateAgainstTheKubernetesAndKEDASchemas() async throws {
        let result = try await validate()
        #expect(result.status != 2, "kubernetes-validate / cloudcoil-models-keda missing (scripts/install-deps): \(result.stderr)")
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("Kubernetes objects (strict") && result.stdout.contains("2 KEDA objects") && result.stdout.hasSuffix("OK\n"),
                "\(result.stdout)")
    }

    /// A misspelt field is what the API server refuses and kubectl would only warn about.
    @Test func aFieldTheSchemasDoNotKnowFailsValidation() async throws {
        let copy = try DeployDocuments.editedCopy(of: ChildProcess.repositoryRoot.appendingPathComponent("deploy"), [
            "kubernetes/push-worker.yaml": [("      terminationGracePeriodSeconds: 45", "      terminationGracePeriodSecond: 45")],
            "kubernetes/push-worker-autoscaling.yaml": [("  pollingInterval:", "  pollingIntervall:")],
            "kubernetes/kafka-topics.yaml": [("  partitions: 3\n", "  partition: 3\n")],
            "kubernetes/dispatch.yaml": [("  replicas: 2\n", "  replicas: \"2\"\n")],
        ])
        defer { try? FileManager.default.removeItem(at: copy) }
        let result = try await validate(deploy: copy.path)
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("Deployment push-worker: Kubernetes 1.25: spec.template.spec: Additional properties are not allowed ('terminationGracePeriodSecond'"), "\(result.stdout)")
        #expect(result.stdout.contains("ScaledObject push-worker: KEDA CRD schema: spec: Additional properties are not allowed ('pollingIntervall'"), "\(result.stdout)")
        #expect(result.stdout.contains("KafkaTopic voip.call-requests.dlq: KafkaTopic fields: spec: Additional properties are not allowed ('partition'"), "\(result.stdout)")
        #expect(result.stdout.contains("Deployment dispatch: Kubernetes 1.37: spec.replicas: '2' is not of type 'integer'"), "\(result.stdout)")
    }

    /// compose's setup writes the backend's plaintext key for the CLI and a keys file holding only
    /// its hash for dispatch: running those lines gives a file dispatch accepts, for that key.
    @Test func composeWritesAKeysFileDispatchAcceptsForTheGeneratedKey() async throws {
        let compose = try String(contentsOf: ChildProcess.repositoryRoot.appendingPathComponent("deploy/compose/compose.yaml"), encoding: .utf8)
        let lines = compose.components(separatedBy: "\n")
        let first = try #require(lines.firstIndex { $0.contains("> dispatch-api-key") })
        let last = try #require(lines.firstIndex { $0.contains("> dispatch-api-keys.json") })
        let script = lines[first...last].joined(separator: "\n").replacingOccurrences(of: "$$", with: "$")
        try await withTemporaryDirectory("compose-keys") { directory in
            let sh = try #require(ChildProcess.findExecutable("sh"))
            let run = try await ChildProcess.run(sh, ["-c", "cd '\(directory.path)' && " + script], timeout: .seconds(20))
            #expect(run.status == 0, "\(run.stderr)")
            let key = try String(contentsOf: directory.appendingPathComponent("dispatch-api-key"), encoding: .utf8)
            let keys = try APIKeysFile.parse(Data(contentsOf: directory.appendingPathComponent("dispatch-api-keys.json")), knownApps: ["demo"]).keys
            #expect(APIKeyAuthenticator(keys: keys).authenticate(key) != nil, "the CLI's key authenticates against the hash dispatch stores")
            #expect(!String(decoding: try Data(contentsOf: directory.appendingPathComponent("dispatch-api-keys.json")), as: UTF8.self).contains(key))
        }
    }
}
