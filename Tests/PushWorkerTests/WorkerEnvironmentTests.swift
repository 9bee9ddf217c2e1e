import CallpushCore
import APNs
import APNsSimulator
import Foundation
import Testing
@testable import PushWorker

@Suite struct WorkerEnvironmentLoading {
    /// A directory with a generated .p8 key, an apps file and an ack secret file.
    struct Files {
        let directory: URL
        var appsPath: String { directory.appendingPathComponent("apps.json").path }
        var secretPath: String { directory.appendingPathComponent("ack-secret").path }

        init(apps: String? = nil) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("worker-env-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let key = APNSSimulatorTestKey(teamID: "TEAM123456", keyID: "ABC123DEFG")
            let keyPath = directory.appendingPathComponent("AuthKey.p8").path
            try key.privateKeyPEM.write(toFile: keyPath, atomically: true, encoding: .utf8)
            let json = apps ?? #"{"rider": {"bundleId": "com.example.rider", "auth": "token", "keyFile": "\#(keyPath)", "keyId": "ABC123DEFG", "teamId": "TEAM123456"}}"#
            try json.write(toFile: appsPath, atomically: true, encoding: .utf8)
            try String(repeating: "s", count: 40).appending("\n").write(toFile: secretPath, atomically: true, encoding: .utf8)
        }

        var env: [String: String] {
            ["CALLPUSH_KAFKA_BOOTSTRAP": "kafka-1:9092,kafka-2:9092", "CALLPUSH_APPS_FILE": appsPath,
             "CALLPUSH_ACK_SECRET_FILE": secretPath]
        }
    }

    func error(_ env: [String: String]) -> ConfigurationError? {
        do {
            _ = try WorkerEnvironment.load(env)
            return nil
        } catch {
            return error
        }
    }

    @Test func completeEnvironmentLoadsWithDefaults() throws {
        let files = try Files()
        var env = files.env
        env["CALLPUSH_KAFKA_SECURITY_PROTOCOL"] = "SASL_SSL"
        env["CALLPUSH_KAFKA_SASL_PASSWORD"] = "env:KAFKA_PASSWORD"
        env["POD_NAME"] = "push-worker-7f9c"
        let loaded = try WorkerEnvironment.load(env)
        #expect(loaded.worker.kafka.bootstrapServers == ["kafka-1:9092", "kafka-2:9092"])
        #expect(loaded.worker.kafka.properties["security.protocol"] == "SASL_SSL")
        #expect(loaded.worker.kafka.properties["sasl.password"] == "env:KAFKA_PASSWORD")
        #expect(loaded.worker.groupInstanceID == nil, "dynamic membership unless asked for")
        #expect(loaded.worker.workerID == "push-worker-7f9c")
        #expect(loaded.worker.maxInFlight == 2_000)
        #expect(loaded.worker.requestsTopic == "voip.call-requests")
        #expect(loaded.apps.keys.map(\.rawValue) == ["rider"])
        #expect(loaded.apps["rider"]?.voipTopic == "com.example.rider.voip")
        #expect(loaded.ackSecret == Array(String(repeating: "s", count: 40).utf8), "file content without the trailing newline")
        #expect(loaded.apns.productionEndpoint == .production)
    }

    @Test func secretFilesOthersCanReadAreWarnedAbout() throws {
        let files = try Files()
        let keyPath = files.directory.appendingPathComponent("AuthKey.p8").path
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: files.secretPath)
        #expect(try WorkerEnvironment.load(files.env).warnings.isEmpty, "private files: no warning")

        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: keyPath)
        // Group-readable by the process's own group is how Kubernetes mounts secrets with fsGroup: fine.
        // Group-writable is not.
        try FileManager.default.setAttributes([.posixPermissions: 0o660], ofItemAtPath: files.secretPath)
        let warnings = try WorkerEnvironment.load(files.env).warnings
        #expect(warnings.count == 2)
        #expect(warnings.contains { $0.hasPrefix("CALLPUSH_APPS_FILE rider.keyFile:") && $0.contains("mode 644") && $0.contains("chmod 600") })
        #expect(warnings.contains { $0.hasPrefix("CALLPUSH_ACK_SECRET_FILE:") && $0.contains("mode 660") })
        #expect(!warnings.joined().contains("PRIVATE KEY") && !warnings.joined().contains("ssss"), "no secret in a warning")
    }

    @Test(arguments: [
        ("CALLPUSH_KAFKA_BOOTSTRAP", nil, "CALLPUSH_KAFKA_BOOTSTRAP: required"),
        ("CALLPUSH_KAFKA_BOOTSTRAP", "kafka", "CALLPUSH_KAFKA_BOOTSTRAP: expected host:port[,host:port…]"),
        ("CALLPUSH_APPS_FILE", nil, "CALLPUSH_APPS_FILE: required"),
        ("CALLPUSH_MAX_IN_FLIGHT", "lots", "CALLPUSH_MAX_IN_FLIGHT: expected a whole number from 1 to 100000"),
        ("CALLPUSH_MAX_IN_FLIGHT", "0", "CALLPUSH_MAX_IN_FLIGHT: expected a whole number from 1 to 100000"),
        ("CALLPUSH_DEDUPE_CAPACITY", "9", "CALLPUSH_DEDUPE_CAPACITY: expected a whole number from 10 to 10000000"),
        ("CALLPUSH_APNS_SANDBOX_ENDPOINT", "localhost", "CALLPUSH_APNS_SANDBOX_ENDPOINT: expected host:port"),
        ("CALLPUSH_ACK_SECRET_FILE", "/nonexistent/secret", "CALLPUSH_ACK_SECRET_FILE: cannot read file /nonexistent/secret"),
    ] as [(String, String?, String)])
    func badValueNamesTheKey(key: String, value: String?, expected: String) throws {
        var env = try Files().env
        env[key] = value
        #expect(error(env)?.description == expected)
    }

    /// The fault campaign runs a worker whose dedupe stores fill within a two-minute run.
    @Test func aSmallDedupeCapacityIsAccepted() throws {
        var env = try Files().env
        env["CALLPUSH_DEDUPE_CAPACITY"] = "10"
        #expect(try WorkerEnvironment.load(env).worker.dedupeCapacity == 10)
    }

    @Test func shortAckSecretIsRefusedWithoutPrintingIt() throws {
        var env = try Files().env
        env["CALLPUSH_ACK_SECRET_FILE"] = nil
        env["CALLPUSH_ACK_SECRET"] = "too-short-secret"
        let problem = try #require(error(env))
        #expect(problem.description == "CALLPUSH_ACK_SECRET: must be at least 32 bytes (it is 16)")
        #expect(!problem.description.contains("too-short-secret"))
    }

    @Test func appsFileProblemsNameTheAppAndField() throws {
        let missingKey = try Files(apps: #"{"rider": {"bundleId": "com.example.rider", "auth": "token", "keyId": "ABC123DEFG", "teamId": "TEAM123456"}}"#)
        #expect(error(missingKey.env)?.description == #"CALLPUSH_APPS_FILE rider.keyFile: required for auth "token""#)
        let badAuth = try Files(apps: #"{"rider": {"bundleId": "com.example.rider", "auth": "password"}}"#)
        #expect(error(badAuth.env)?.key == "CALLPUSH_APPS_FILE rider.auth")
        let notJSON = try Files(apps: "rider: yes")
        #expect(error(notJSON.env)?.key == "CALLPUSH_APPS_FILE")
        let empty = try Files(apps: "{}")
        #expect(error(empty.env)?.description == "CALLPUSH_APPS_FILE: no apps configured")
        // The bundle id becomes the apns-topic header of every push: only Apple's characters.
        for bundleID in ["com.example.rider\\u0000", "com.example rider", "com.example/rider", "com.exämple.rider"] {
            let badBundle = try Files(apps: #"{"rider": {"bundleId": "\#(bundleID)", "auth": "token", "keyId": "ABC123DEFG", "teamId": "TEAM123456"}}"#)
            #expect(error(badBundle.env)?.key == "CALLPUSH_APPS_FILE rider.bundleId", "\(bundleID)")
        }
    }
}

extension WorkerEnvironmentLoading {
    /// H5: a Deployment's pod names do not survive a replacement, and librdkafka 2.0.2's static members
    /// never send LeaveGroup: the pod name must not make the worker a static member.
    @Test func thePodNameAloneDoesNotMakeAStaticMember() throws {
        let files = try Files()
        var env = files.env
        env["POD_NAME"] = "push-worker-7f9c-abcde"
        let dynamic = try WorkerEnvironment.load(env)
        #expect(dynamic.worker.groupInstanceID == nil)
        #expect(dynamic.worker.workerID == "push-worker-7f9c-abcde")
        env["CALLPUSH_GROUP_INSTANCE_ID"] = "push-worker-0"
        let stateful = try WorkerEnvironment.load(env)
        #expect(stateful.worker.groupInstanceID == "push-worker-0", "static membership only when asked for (a StatefulSet ordinal)")
    }
}

extension WorkerEnvironmentLoading {
    /// A service-account JSON in the files' directory (the FCM harness's generated account).
    func writeServiceAccount(_ files: Files, name: String = "firebase.json") throws -> String {
        let path = files.directory.appendingPathComponent(name).path
        try FCMHarness.account.json(tokenURI: "https://127.0.0.1:8443/token").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func anAppGetsItsFCMServiceAccountFromAFileAndAnAppMayBeAndroidOnly() throws {
        let files = try Files()
        let accountPath = try writeServiceAccount(files)
        let keyPath = files.directory.appendingPathComponent("AuthKey.p8").path
        try #"""
        {"rider": {"bundleId": "com.example.rider", "auth": "token", "keyFile": "\#(keyPath)", "keyId": "ABC123DEFG", "teamId": "TEAM123456",
                   "fcm": {"serviceAccountFile": "\#(accountPath)"}},
         "courier": {"fcm": {"serviceAccountFile": "\#(accountPath)"}}}
        """#.write(toFile: files.appsPath, atomically: true, encoding: .utf8)
        var env = files.env
        env["CALLPUSH_FCM_ENDPOINT"] = "https://fcm.example.test:8443"
        env["CALLPUSH_FCM_CONNECTIONS"] = "3"
        let loaded = try WorkerEnvironment.load(env)
        #expect(loaded.apps.keys.map(\.rawValue) == ["rider"], "only rider has APNs credentials")
        #expect(Set(loaded.fcmApps.keys.map(\.rawValue)) == ["rider", "courier"])
        #expect(loaded.fcmApps["courier"]?.serviceAccount.projectID == "callpush-worker-test")
        #expect(loaded.fcmApps["courier"]?.serviceAccount.tokenURI == "https://127.0.0.1:8443/token")
        #expect(loaded.fcm.endpoint == "https://fcm.example.test:8443")
        #expect(loaded.fcm.connections == 3)
    }

    @Test func aBadServiceAccountIsNamedWithoutItsContent() throws {
        let files = try Files()
        let badPath = files.directory.appendingPathComponent("bad.json").path
        let secretLooking = "-----BEGIN PRIVATE KEY-----not-a-key-----END PRIVATE KEY-----"
        try #"{"type": "service_account", "project_id": "p", "client_email": "a@b.c", "private_key": "\#(secretLooking)"}"#
            .write(toFile: badPath, atomically: true, encoding: .utf8)
        try #"{"courier": {"fcm": {"serviceAccountFile": "\#(badPath)"}}}"#.write(toFile: files.appsPath, atomically: true, encoding: .utf8)
        let problem = try #require(error(files.env))
        #expect(problem.key == "CALLPUSH_APPS_FILE courier.fcm.serviceAccountFile")
        #expect(!problem.description.contains("not-a-key"), "the key is never quoted: \(problem)")

        try #"{"courier": {"fcm": {"serviceAccountFile": "/nonexistent/firebase.json"}}}"#.write(toFile: files.appsPath, atomically: true, encoding: .utf8)
        #expect(error(files.env)?.key == "CALLPUSH_APPS_FILE courier.fcm.serviceAccountFile")

        try #"{"courier": {}}"#.write(toFile: files.appsPath, atomically: true, encoding: .utf8)
        #expect(error(files.env)?.description == "CALLPUSH_APPS_FILE courier: needs APNs credentials (bundleId and auth), an fcm service account, or both")

        var env = files.env
        try #"{"courier": {"fcm": {"serviceAccountFile": "\#(try writeServiceAccount(files))"}}}"#.write(toFile: files.appsPath, atomically: true, encoding: .utf8)
        env["CALLPUSH_FCM_ENDPOINT"] = "http://fcm.example.test"
        #expect(error(env)?.key == "CALLPUSH_FCM_ENDPOINT", "plain HTTP is refused")
    }
}
