import CallContract
import CallpushCore
import CallpushTestSupport
import Foundation
import Hummingbird
import Kafka
import Logging
import NIOHTTP1
import ServiceLifecycle
import Synchronization
@testable import DispatchService
import Locking

let testSecret = Array(repeating: UInt8(42), count: 32)
let testKey = "cpk_test-key-0123456789"
let testAuth = ["Authorization": "Bearer \(testKey)", "Content-Type": "application/json"]

/// Quiet unless DISPATCH_TEST_LOG names a level.
let quietLogger: Logger = .quietTestLogger(label: "dispatch-tests", levelFrom: "DISPATCH_TEST_LOG")

/// An FCM registration token (mixed case, `:`, `-`, `_`), distinct per seed.
func androidToken(_ seed: Int) -> String {
    "dF\(seed)x-Q_7:APA91b" + String(repeating: "Hk3_Lp-Z", count: 18)
}

/// A ring body as a backend would send it.
func ringBody(callId: String? = CallID.make(), tokens: [String] = [hexToken(0xabc)], app: String = "rider",
              ringTimeoutSeconds: Int? = nil, attributes: [String: String] = ["rideId": "R-1"]) -> [String: Any] {
    var body: [String: Any] = [
        "app": app,
        "devices": tokens.enumerated().map { ["token": $1, "environment": "sandbox", "id": "dev-\($0)"] },
        "caller": ["handle": "driver-1", "displayName": "Driver"],
        "hasVideo": false,
        "attributes": attributes,
    ]
    if let callId { body["callId"] = callId }
    if let ringTimeoutSeconds { body["ringTimeoutSeconds"] = ringTimeoutSeconds }
    return body
}

func json(_ object: Any) -> Data {
    (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
}

/// Records what would have been published; can be told to fail like an unreachable Kafka.
final class RecordingPublisher: EventPublishing {
    let records = Locked<[KafkaProducerRecord]>([])
    let failing = Atomic<Bool>(false)

    func publish(_ records: [KafkaProducerRecord]) async throws(DispatchProblem) -> [Int32] {
        if failing.load(ordering: .relaxed) { throw DispatchProblem.unavailable(retryAfter: 1, detail: "test: Kafka down") }
        self.records.withLock { $0.append(contentsOf: records) }
        return records.map { $0.partition ?? 0 }
    }

    var count: Int { records.withLock { $0.count } }
}

func testConfiguration(kafka: KafkaConfiguration = KafkaConfiguration(bootstrapServers: ["127.0.0.1:1"]),
                       rate: Double = 1_000) -> DispatchConfiguration {
    var configuration = DispatchConfiguration(kafka: kafka, apps: ["rider"],
                                              apiKeys: [APIKey(name: "test", plaintext: testKey, ratePerSecond: rate)],
                                              ackSecret: testSecret, instanceID: "dispatch-test")
    configuration.host = "127.0.0.1"
    configuration.port = 0
    configuration.metricsHost = "127.0.0.1"
    configuration.metricsPort = 0
    configuration.limits.maxBodyBytes = 16 * 1024
    configuration.eventStreamLimit = .seconds(5)
    configuration.ringsPerDevicePerMinute = 100_000  // tests ring the same token often; DeviceRateLimitTests checks the limit
    return configuration
}

/// The API's real HTTP server on port 0 with a recording publisher (no Kafka).
struct APIHarness {
    let api: DispatchAPI
    let publisher: RecordingPublisher
    let port: Int
    let group: ServiceGroup

    /// `limiterClock` stands still for tests that count what a limit lets through: on a loaded
    /// machine a test's requests can take long enough for a bucket to refill.
    static func with(_ configuration: DispatchConfiguration = testConfiguration(),
                     limiterClock: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds,
                     _ body: (APIHarness) async throws -> Void) async throws {
        let publisher = RecordingPublisher()
        let view = StatusView(window: .seconds(600), budgetBytes: 16 << 20)
        let api = try DispatchAPI(configuration: configuration, view: view, publisher: publisher, metrics: DispatchMetrics(),
                                  logger: quietLogger, limiterClock: limiterClock, isReady: { true })
        // The server dispatch itself runs (connection limits, timeouts), on a free port.
        let bound = BoundPort()
        let identity = try configuration.tls.map { try TLSIdentity(files: $0, logger: quietLogger) }
        let app = DispatchApp.server(router: api.router(), host: "127.0.0.1", port: 0, configuration: configuration, tls: identity,
                                     bound: bound, logger: quietLogger)
        let group = ServiceGroup(services: [identity].compactMap { $0 } + [app], logger: quietLogger)
        let running = Task { try await group.run() }
        let port = await bound.wait()
        let harness = APIHarness(api: api, publisher: publisher, port: port, group: group)
        do {
            try await body(harness)
        } catch {
            await group.triggerGracefulShutdown()
            _ = await running.result
            throw error
        }
        await group.triggerGracefulShutdown()
        _ = await running.result
    }

    func post(_ path: String, _ body: Data, headers: [String: String] = testAuth) async throws -> HTTPAnswer {
        try await TestHTTPClient.request(.POST, port: port, path: path, headers: headers, body: body)
    }

    func get(_ path: String, headers: [String: String] = testAuth) async throws -> HTTPAnswer {
        try await TestHTTPClient.request(.GET, port: port, path: path, headers: headers)
    }
}
