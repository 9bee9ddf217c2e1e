import CallContract
import CallpushTestSupport
import Foundation
import Locking
import Testing
@testable import DispatchService

@Suite struct ConfigurationTests {
    static func files() throws -> (apps: String, keys: String, secret: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("dispatch-env-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let apps = dir.appendingPathComponent("apps.json").path
        let keys = dir.appendingPathComponent("keys.json").path
        let secret = dir.appendingPathComponent("secret").path
        try Data(#"{"rider": {"bundleId": "com.example.rider", "auth": "token"}, "driver": {}}"#.utf8).write(to: URL(fileURLWithPath: apps))
        try Data(#"{"tenants": [{"name": "taxi", "apps": ["rider"], "keys": [{"name": "taxi-backend", "sha256": "\#(APIKey.hexHash("k1"))", "ratePerSecond": 5}]}]}"#.utf8)
            .write(to: URL(fileURLWithPath: keys))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keys)
        try Data((String(repeating: "s", count: 32) + "\n").utf8).write(to: URL(fileURLWithPath: secret))
        return (apps, keys, secret)
    }

    static func environment() throws -> [String: String] {
        let (apps, keys, secret) = try files()
        return ["CALLPUSH_KAFKA_BOOTSTRAP": "k1:9092,k2:9092", "CALLPUSH_APPS_FILE": apps,
                "CALLPUSH_DISPATCH_API_KEYS_FILE": keys, "CALLPUSH_ACK_SECRET_FILE": secret]
    }

    @Test func anAckSecretFileOthersCanReadIsWarnedAbout() throws {
        let env = try Self.environment()
        let secret = try #require(env["CALLPUSH_ACK_SECRET_FILE"])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secret)
        #expect(try DispatchEnvironment.load(env).warnings.isEmpty)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: secret)
        let warnings = try DispatchEnvironment.load(env).warnings
        #expect(warnings.count == 1)
        #expect(warnings.first?.hasPrefix("CALLPUSH_ACK_SECRET_FILE:") == true && warnings.first?.contains("chmod 600") == true)
        #expect(warnings.first?.contains("ssssssss") == false, "never the secret itself")
    }

    @Test func environmentWithDefaults() throws {
        var env = try Self.environment()
        env["CALLPUSH_KAFKA_SECURITY_PROTOCOL"] = "SASL_SSL"
        let configuration = try DispatchEnvironment.load(env)
        #expect(configuration.kafka.bootstrapServers == ["k1:9092", "k2:9092"])
        #expect(configuration.kafka.properties["security.protocol"] == "SASL_SSL")
        #expect(configuration.apps == ["rider", "driver"])
        #expect(configuration.apiKeys.map(\.name) == ["taxi-backend"])
        #expect(configuration.apiKeys.first?.tenant == "taxi")
        #expect(configuration.apiKeys.first?.apps == ["rider"])
        #expect(configuration.apiKeys.first?.ratePerSecond == 5)
        #expect(configuration.ackSecret.count == 32, "trailing newline of the secret file removed")
        #expect(configuration.port == 8080)
        #expect(configuration.publishTimeout == .seconds(5))
        #expect(configuration.limits.ringTimeoutSeconds == 1...120)
        #expect(configuration.limits.defaultRingTimeoutSeconds == 30)
        #expect(configuration.requestsTopic == Topics.requests)
        #expect(configuration.webhooks.isEmpty)
        #expect(configuration.webhookDelivery.groupID == "callpush-dispatch-webhooks")
    }

    @Test(arguments: [
        ("CALLPUSH_KAFKA_BOOTSTRAP", "", "CALLPUSH_KAFKA_BOOTSTRAP"),
        ("CALLPUSH_KAFKA_BOOTSTRAP", "nohost", "CALLPUSH_KAFKA_BOOTSTRAP"),
        ("CALLPUSH_DISPATCH_PORT", "70000", "CALLPUSH_DISPATCH_PORT"),
        ("CALLPUSH_DISPATCH_PUBLISH_TIMEOUT_MS", "fast", "CALLPUSH_DISPATCH_PUBLISH_TIMEOUT_MS"),
        ("CALLPUSH_DISPATCH_API_KEYS_FILE", "/nonexistent", "CALLPUSH_DISPATCH_API_KEYS_FILE"),
        ("CALLPUSH_APPS_FILE", "/nonexistent", "CALLPUSH_APPS_FILE"),
        ("CALLPUSH_DISPATCH_WEBHOOK_URL", "https://hooks.example/callpush", "CALLPUSH_DISPATCH_WEBHOOK_URL"),
        ("CALLPUSH_DISPATCH_TLS_CERT_FILE", "/etc/chain.pem", "CALLPUSH_DISPATCH_TLS_KEY_FILE"),
        ("CALLPUSH_DISPATCH_MAX_BODY_BYTES", "1048576", "CALLPUSH_DISPATCH_MAX_BODY_BYTES"),
    ])
    func badValueIsRefusedNamingTheKey(key: String, value: String, named: String) throws {
        var env = try Self.environment()
        env[key] = value
        let error = #expect(throws: DispatchConfigurationError.self) { try DispatchEnvironment.load(env) }
        #expect(error?.key == named)
    }

    @Test func shortAckSecretIsRefused() throws {
        var env = try Self.environment()
        env["CALLPUSH_ACK_SECRET_FILE"] = nil
        env["CALLPUSH_ACK_SECRET"] = "short"
        do {
            _ = try DispatchEnvironment.load(env)
            Issue.record("accepted a short secret")
        } catch {
            #expect(error.key == "CALLPUSH_ACK_SECRET")
            #expect(!error.description.contains("short"), "the secret is never echoed")
        }
    }

    @Test func apiKeysFileRejectsMistakes() {
        func file(_ tenants: String) -> Data { Data(#"{"tenants": [\#(tenants)]}"#.utf8) }
        let hash = APIKey.hexHash("k1"), other = APIKey.hexHash("k2")
        let bad: [(String, Data)] = [
            ("bad hash", file(#"{"name": "t", "apps": ["rider"], "keys": [{"name": "a", "sha256": "abc"}]}"#)),
            ("no tenants", file("")),
            ("the old array format", Data(#"[{"name": "a", "sha256": "\#(hash)"}]"#.utf8)),
            ("no apps", file(#"{"name": "t", "keys": [{"name": "a", "sha256": "\#(hash)"}]}"#)),
            ("empty apps", file(#"{"name": "t", "apps": [], "keys": [{"name": "a", "sha256": "\#(hash)"}]}"#)),
            ("unknown app", file(#"{"name": "t", "apps": ["taxi"], "keys": [{"name": "a", "sha256": "\#(hash)"}]}"#)),
            ("bad tenant name", file(#"{"name": "t t", "apps": ["rider"], "keys": [{"name": "a", "sha256": "\#(hash)"}]}"#)),
            ("tenant twice", file(#"{"name": "t", "apps": ["*"], "keys": [{"name": "a", "sha256": "\#(hash)"}]}, {"name": "t", "apps": ["*"], "keys": [{"name": "b", "sha256": "\#(other)"}]}"#)),
            ("key name twice", file(#"{"name": "t", "apps": ["*"], "keys": [{"name": "a", "sha256": "\#(hash)"}, {"name": "a", "sha256": "\#(other)"}]}"#)),
            ("hash twice", file(#"{"name": "t", "apps": ["*"], "keys": [{"name": "a", "sha256": "\#(hash)"}, {"name": "b", "sha256": "\#(hash)"}]}"#)),
            ("plain http webhook", file(#"{"name": "t", "apps": ["*"], "webhook": {"url": "http://hooks.example/x", "secret": "0123456789abcdef"}, "keys": [{"name": "a", "sha256": "\#(hash)"}]}"#)),
            ("short webhook secret", file(#"{"name": "t", "apps": ["*"], "webhook": {"url": "https://hooks.example/x", "secret": "short"}, "keys": [{"name": "a", "sha256": "\#(hash)"}]}"#)),
        ]
        for (name, data) in bad {
            #expect(throws: DispatchConfigurationError.self, "\(name)") { try APIKeysFile.parse(data, knownApps: ["rider"]) }
        }
        let good = file(#"{"name": "t", "apps": ["*"], "webhook": {"url": "https://hooks.example/x?k=v", "secret": "0123456789abcdef"}, "keys": [{"name": "a", "sha256": "\#(hash)"}, {"name": "b", "sha256": "\#(other)"}]}"#)
        let contents = try? APIKeysFile.parse(good, knownApps: ["rider"])
        #expect(contents?.keys.map(\.tenant) == ["t", "t"], "keys of one tenant share its calls")
        #expect(contents?.keys.first?.apps == nil, "[\"*\"]: every app")
        #expect(contents?.webhooks["t"]?.url.query == "k=v")
        #expect(contents?.webhooks["t"]?.description.contains("0123456789abcdef") == false)
    }

    @Test func authenticatorMatchesOnlyTheStoredKey() {
        let authenticator = APIKeyAuthenticator(keys: [
            APIKey(name: "a", plaintext: "key-a"), APIKey(name: "b", sha256: APIKey.hash("key-b")),
        ])
        #expect(authenticator.authenticate("key-a")?.name == "a")
        #expect(authenticator.authenticate("key-b")?.name == "b")
        #expect(authenticator.authenticate("key-c") == nil)
        #expect(authenticator.authenticate("") == nil)
        #expect(APIKey.generatePlaintext() != APIKey.generatePlaintext())
    }

    @Test func tokenBucketRefillsAtTheKeysRate() {
        let clock = Locked(0.0)
        let limiter = RateLimiter(now: { clock.withLock { $0 } })
        let key = APIKey(name: "k", plaintext: "x", ratePerSecond: 2, burst: 2)
        #expect(limiter.acquire(key) == nil)
        #expect(limiter.acquire(key) == nil)
        #expect(limiter.acquire(key) == 1, "empty: retry after about half a second, rounded up")
        clock.withLock { $0 = 0.5 }
        #expect(limiter.acquire(key) == nil, "one token back after 1/rate seconds")
        #expect(limiter.acquire(key) != nil)
        #expect(limiter.acquire(APIKey(name: "other", plaintext: "y", ratePerSecond: 2, burst: 2)) == nil, "buckets are per key")
    }

    @Test func idempotencyMemoryIsBoundedAndExpires() async {
        let clock = Locked(0.0)
        let answer = Data(repeating: 0x20, count: 100)
        let entryBytes = IdempotencyStore.entryOverhead + 1 + 1 + answer.count
        let store = IdempotencyStore(window: .seconds(10), budgetBytes: 2 * entryBytes, now: { clock.withLock { $0 } })
        for id in ["a", "b", "c"] {
            #expect(await store.begin(key: id, fingerprint: [1]) == .proceed)
            store.finish(key: id, fingerprint: [1], response: answer)
        }
        #expect(store.count == 2)
        #expect(store.bytes <= store.budgetBytes)
        #expect(await store.begin(key: "c", fingerprint: [1]) == .replay(answer))
        #expect(await store.begin(key: "c", fingerprint: [2]) == .conflict)
        clock.withLock { $0 = 11 }
        #expect(await store.begin(key: "c", fingerprint: [2]) == .proceed, "forgotten after the window")
        store.finish(key: "c", fingerprint: [2], response: nil)
        #expect(await store.begin(key: "c", fingerprint: [3]) == .conflict, "a failed request's fingerprint is kept")
        #expect(await store.begin(key: "c", fingerprint: [2]) == .proceed, "the same request may run again after a failure")
    }

    @Test func aRepeatWhileTheFirstIsInFlightWaitsForItsAnswer() async {
        // A fixed clock: on a loaded machine the wait below may outlast the window.
        let store = IdempotencyStore(window: .seconds(10), budgetBytes: 1 << 20, now: { 0 })
        #expect(await store.begin(key: "k", fingerprint: [1]) == .proceed)
        let repeated = Task { await store.begin(key: "k", fingerprint: [1]) }
        try? await Task.sleep(for: .milliseconds(50))
        store.finish(key: "k", fingerprint: [1], response: Data("first".utf8))
        #expect(await repeated.value == .replay(Data("first".utf8)))
    }

    @Test func statusViewForgetsOldCallsAndEndsSubscriptionsWhenComplete() async throws {
        let clock = Locked(0.0)
        let now = Date()
        func ring(_ id: String) -> RingRequest {
            RingRequest(callId: id, app: "rider", device: Device(token: hexToken(1), environment: .sandbox), caller: Caller(handle: "h"),
                        requestedAt: now, ringDeadline: now.addingTimeInterval(30), tenant: "t")
        }
        let ids = (0..<3).map { _ in CallID.make() }
        var one = CallView(callId: ids[0], tenant: "t")
        one.apply(ring: ring(ids[0]), deviceKey: DeviceKey.make(token: hexToken(1)), partition: 1)
        let view = StatusView(window: .seconds(60), budgetBytes: 2 * one.estimatedBytes, now: { clock.withLock { $0 } })
        for id in ids { view.apply(rings: [ring(id)], partition: 1) }
        #expect(view.count == 2)
        #expect(view.call(CallKey(tenant: "t", callId: ids[0])) == nil, "oldest call forgotten beyond the budget")
        let key = CallKey(tenant: "t", callId: ids[2])
        let subscription = try #require(view.subscribe(key))
        #expect(subscription.initial.isEmpty)
        let deviceKey = DeviceKey.make(token: hexToken(1))
        view.apply(status: CallStatus(callId: ids[2], deviceKey: deviceKey, state: .retrying, at: now, worker: "w", tenant: "t"), partition: 1, offset: 7)
        view.apply(status: CallStatus(callId: ids[2], deviceKey: deviceKey, state: .sent, attempt: 2, at: now, worker: "w", tenant: "t"), partition: 1, offset: 9)
        var received: [String] = []
        while let item = await subscription.buffer.next() {
            switch item {
            case .frame(let frame): received.append(String(buffer: frame).components(separatedBy: "\n")[0])
            case .end(let complete): received.append("end \(complete)")
            }
        }
        #expect(received == ["id: 7", "id: 9", "end true"])
        #expect(view.call(key)?.isComplete == true)
        subscription.cancel()
        #expect(view.subscriberCount == 0)
        clock.withLock { $0 = 120 }
        view.apply(rings: [ring(ids[0])], partition: 1)
        #expect(view.call(key) == nil, "forgotten after the window")
    }

    /// A worker's call-level record of a processed cancel is not a delivery of the call.
    @Test func aWorkersCancelMarkerAddsNoDeliveryToTheView() {
        let now = Date()
        let id = CallID.make()
        let view = StatusView(window: .seconds(60), budgetBytes: 1 << 20)
        view.apply(rings: [RingRequest(callId: id, app: "rider", device: Device(token: hexToken(1), environment: .sandbox),
                                       caller: Caller(handle: "h"), requestedAt: now, ringDeadline: now.addingTimeInterval(30),
                                       tenant: "t")], partition: 1)
        view.apply(status: CallStatus(callId: id, state: .cancelled, at: now, worker: "w", tenant: "t"), partition: 1, offset: 3)
        let call = view.call(CallKey(tenant: "t", callId: id))
        #expect(call?.deliveries.count == 1)
        #expect(call?.isComplete == false, "the delivery itself is not cancelled until the worker says so")
        view.apply(status: CallStatus(callId: CallID.make(), state: .cancelled, at: now, worker: "w", tenant: "t"), partition: 1, offset: 4)
        #expect(view.count == 1, "a marker for an unknown call adds nothing")
    }
}
