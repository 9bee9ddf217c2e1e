import CallpushTestSupport
import Foundation
import Testing

/// deploy/ runs as written: the compose file and the Kubernetes manifests start the built programs
/// with their commands, environment, files, users and mounts (DeployRun says how little is mapped
/// to run them on one machine), a call rings through dispatch to the simulator, and every program
/// stops within its grace period (the pods while a call is in flight, which must still end `sent`). Drift between the files and the programs fails the run: the
/// mutations below each break one thing in a copy of deploy/.
///
/// Needs root (mount namespaces, chroot, other users), as CI and the development machines have;
/// scripts/test runs it as its own stage ("deploy run": `swift test --skip-build --filter DeployRunsAsWritten`).
@Suite(.serialized, .enabled(if: ContainerRuntime.available, "running the deploy files needs root"))
struct DeployRunsAsWritten {
    static var deploy: URL { ChildProcess.repositoryRoot.appendingPathComponent("deploy") }

    /// Runs `form` on `deploy`; returns the steps, or the failure's text.
    static func run(_ form: Form, deploy: URL = Self.deploy) async -> Result<[String], DeployRunFailure> {
        let run: DeployRun
        do { run = try DeployRun(deploy: deploy) } catch { return .failure(DeployRunFailure("\(error)")) }
        do {
            switch form {
            case .compose: try await ComposeRun(run: run).execute()
            case .kubernetes: try await KubernetesRun(run: run).execute()
            }
            await run.tearDown()
            return .success(run.steps)
        } catch {
            await run.tearDown()
            return .failure(error as? DeployRunFailure ?? DeployRunFailure("\(error)"))
        }
    }

    enum Form: String, Sendable { case compose, kubernetes }

    @Test func composeRunsAsWritten() async throws {
        let result = await Self.run(.compose)
        if case .failure(let failure) = result { Issue.record("\(failure)") }
        if case .success(let steps) = result { print(steps.map { "deploy run (compose): " + $0 }.joined(separator: "\n")) }
    }

    @Test func kubernetesRunsAsWritten() async throws {
        let result = await Self.run(.kubernetes)
        if case .failure(let failure) = result { Issue.record("\(failure)") }
        if case .success(let steps) = result { print(steps.map { "deploy run (kubernetes): " + $0 }.joined(separator: "\n")) }
    }

    /// One way deploy/ can drift from the programs, and what the run must say about it.
    struct Drift: Sendable, CustomTestStringConvertible {
        var what: String
        var form: Form
        var edits: [String: [(String, String)]]
        var expected: [String]
        var testDescription: String { what }
    }

    static let drifts: [Drift] = [
        Drift(what: "an environment variable the program does not know", form: .compose,
              edits: ["compose/compose.yaml": [("CALLPUSH_DRAIN_TIMEOUT_MS", "CALLPUSH_DRAIN_TIMEOUT")]],
              expected: ["CALLPUSH_DRAIN_TIMEOUT is not read by any program"]),
        // Dispatch review F11: compose handed dispatch the backend's plaintext key where it reads the
        // hashed keys file, and dispatch exited at start.
        Drift(what: "dispatch given the plaintext API key instead of the keys file (F11)", form: .compose,
              edits: ["compose/compose.yaml": [("CALLPUSH_DISPATCH_API_KEYS_FILE: /certs/dispatch-api-keys.json",
                                                "CALLPUSH_DISPATCH_API_KEYS_FILE: /certs/dispatch-api-key")]],
              expected: ["dispatch exited at start", "CALLPUSH_DISPATCH_API_KEYS_FILE"]),
        Drift(what: "a file path the mount does not provide", form: .kubernetes,
              edits: ["kubernetes/dispatch.yaml": [("value: /run/secrets/dispatch/api-keys", "value: /run/secrets/dispatch/api-keys.json")]],
              expected: ["exited at start", "CALLPUSH_DISPATCH_API_KEYS_FILE"]),
        Drift(what: "a secret mode the program cannot read (no fsGroup)", form: .kubernetes,
              edits: ["kubernetes/push-worker.yaml": [("        fsGroup: 10001\n", "")]],
              // The first program to read the worker's secrets is `callpush topics create`, run with the worker's
              // Kafka settings and mounts as kafka-topics.yaml documents it.
              expected: ["cannot read file '/run/secrets/kafka/password'"]),
        Drift(what: "a probe path that 404s", form: .kubernetes,
              edits: ["kubernetes/dispatch.yaml": [("          readinessProbe:\n            httpGet:\n              path: /readyz",
                                                    "          readinessProbe:\n            httpGet:\n              path: /ready")]],
              expected: ["readinessProbe", "/ready did not answer 200", "HTTP 404"]),
        Drift(what: "a port mismatch (metrics annotation on the API port)", form: .kubernetes,
              edits: ["kubernetes/dispatch.yaml": [("prometheus.io/port: \"9090\"", "prometheus.io/port: \"8080\"")]],
              expected: ["Prometheus annotations point at", ":8080/metrics"]),
        Drift(what: "an app whose key file the volume does not hold", form: .compose,
              edits: ["compose/apps.json": [("/certs/AuthKey_DEVKEY0001.p8", "/certs/AuthKey_DEVKEY0002.p8")]],
              expected: ["push-worker-1 exited at start", "AuthKey_DEVKEY0002.p8"]),
    ]

    @Test(arguments: drifts) func driftFailsTheRun(_ drift: Drift) async throws {
        let copy = try DeployDocuments.editedCopy(of: Self.deploy, drift.edits)
        defer { try? FileManager.default.removeItem(at: copy) }
        let result = await Self.run(drift.form, deploy: copy)
        guard case .failure(let failure) = result else {
            Issue.record("the run passed with \(drift.what)")
            return
        }
        for expected in drift.expected {
            #expect(failure.description.contains(expected), "\(drift.what): \(failure)")
        }
    }
}
