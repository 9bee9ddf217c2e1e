import CallContract
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
        try Data(#"[{"name": "taxi", "sha256": "\#(APIKey.hexHash("k1"))", "ratePerSecond": 5}]"#.utf8).write(to: URL(fileURLWithPath: keys))
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
        #expect(configuration.apiKeys.map(\.name) == ["taxi"])
        #expect(configuration.apiKeys.first?.ratePerSecond == 5)
        #expect(configuration.ackSecret.count == 32, "trailing newline of the secret file removed")
        #expect(configuration.port == 8080)
        #expect(configuration.publishTimeout == .seconds(5))
        #expect(configuration.limits.ringTimeoutSeconds == 1...120)
        #expect(configuration.limits.defaultRingTimeoutSeconds == 30)
        #expect(configuration.requestsTopic == Topics.requests)
        #expect(configuration.webhook == nil)
    }

    @Test(arguments: [
        ("CALLPUSH_KAFKA_BOOTSTRAP", "", "CALLPUSH_KAFKA_BOOTSTRAP"),
        ("CALLPUSH_KAFKA_BOOTSTRAP", "nohost", "CALLPUSH_KAFKA_BOOTSTRAP"),
        ("CALLPUSH_DISPATCH_PORT", "70000", "CALLPUSH_DISPATCH_PORT"),
        ("CALLPUSH_DISPATCH_PUBLISH_TIMEOUT_MS", "fast", "CALLPUSH_DISPATCH_PUBLISH_TIMEOUT_MS"),
        ("CALLPUSH_DISPATCH_API_KEYS_FILE", "/nonexistent", "CALLPUSH_DISPATCH_API_KEYS_FILE"),
        ("CALLPUSH_APPS_FILE", "/nonexistent", "CALLPUSH_APPS_FILE"),
        ("CALLPUSH_DISPATCH_WEBHOOK_URL", "ftp://x", "CALLPUSH_DISPATCH_WEBHOOK_URL"),
        ("CALLPUSH_DISPATCH_WEBHOOK_URL", "http://hooks.example/callpush", "CALLPUSH_DISPATCH_WEBHOOK_SECRET_FILE"),
    ])
    func badValueIsRefusedNamingTheKey(key: String, value: String, named: String) throws {
        var env = try Self.environment()
        env[key] = value
        #expect(throws: DispatchConfigurationError.self) { try DispatchEnvironment.load(env) }
        do {
            _ = try DispatchEnvironment.load(env)
        } catch {
            #expect(error.key == named)
        }
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

    @Test func apiKeysFileRejectsBadHashes() {
        #expect(throws: DispatchConfigurationError.self) { try APIKeysFile.parse(Data(#"[{"name": "a", "sha256": "abc"}]"#.utf8)) }
        #expect(throws: DispatchConfigurationError.self) { try APIKeysFile.parse(Data("[]".utf8)) }
        #expect(throws: DispatchConfigurationError.self) { try APIKeysFile.parse(Data(#"{"name": "a"}"#.utf8)) }
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

    @Test func idempotencyMemoryIsBoundedAndExpires() {
        let clock = Locked(0.0)
        let store = IdempotencyStore(window: .seconds(10), capacity: 2, now: { clock.withLock { $0 } })
        let answer = Data("{}".utf8)
        for id in ["a", "b", "c"] {
            #expect(store.begin(callId: id, fingerprint: [1]) == .proceed)
            store.finish(callId: id, fingerprint: [1], response: answer)
        }
        #expect(store.count <= 2)
        #expect(store.begin(callId: "c", fingerprint: [1]) == .replay(answer))
        #expect(store.begin(callId: "c", fingerprint: [2]) == .conflict)
        clock.withLock { $0 = 11 }
        #expect(store.begin(callId: "c", fingerprint: [2]) == .proceed, "forgotten after the window")
        store.finish(callId: "c", fingerprint: [2], response: nil)
        #expect(store.begin(callId: "c", fingerprint: [3]) == .proceed, "a failed request is not remembered")
    }

    @Test func statusViewForgetsOldCallsAndEndsSubscriptionsWhenComplete() async throws {
        let clock = Locked(0.0)
        let view = StatusView(window: .seconds(60), capacity: 2, now: { clock.withLock { $0 } })
        let now = Date()
        func ring(_ id: String) -> RingRequest {
            RingRequest(callId: id, app: "rider", device: Device(token: hexToken(1), environment: .sandbox), caller: Caller(handle: "h"),
                        requestedAt: now, ringDeadline: now.addingTimeInterval(30))
        }
        let ids = (0..<3).map { _ in CallID.make() }
        for id in ids { view.apply(rings: [ring(id)], partition: 1) }
        #expect(view.count == 2)
        #expect(view.call(ids[0]) == nil, "oldest call forgotten beyond capacity")
        let subscription = try #require(view.subscribe(ids[2]))
        #expect(subscription.initial.isEmpty)
        let deviceKey = DeviceKey.make(token: hexToken(1))
        view.apply(status: CallStatus(callId: ids[2], deviceKey: deviceKey, state: .retrying, at: now, worker: "w"), partition: 1)
        view.apply(status: CallStatus(callId: ids[2], deviceKey: deviceKey, state: .sent, attempt: 2, at: now, worker: "w"), partition: 1)
        var received: [StatusView.Event] = []
        for await event in subscription.events {
            received.append(event)
            if event == .complete { break }
        }
        #expect(received.count == 3)
        #expect(received.last == .complete)
        #expect(view.call(ids[2])?.isComplete == true)
        subscription.cancel()
        #expect(view.subscriberCount == 0)
        clock.withLock { $0 = 120 }
        view.apply(rings: [ring(ids[0])], partition: 1)
        #expect(view.call(ids[2]) == nil, "forgotten after the window")
    }
}
