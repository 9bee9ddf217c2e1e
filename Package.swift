// swift-tools-version: 6.1
import PackageDescription

// The ThreadSanitizer build (scripts/tsan sets CALLPUSH_WITHOUT_OTLP) leaves swift-otel out: Swift
// 6.3.1 refuses to compile swift-otel 1.6.0's OTelBatchSpanProcessor with -sanitize=thread ("sending
// 'logger' risks causing data races"), and the sanitized suites export no spans. Every other build
// has the OTLP exporter.
let withOTLP = Context.environment["CALLPUSH_WITHOUT_OTLP"] == nil

// The products of the package dependencies, each named once.
extension Target.Dependency {
    static let logging: Self = .product(name: "Logging", package: "swift-log")
    static let serviceLifecycle: Self = .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
    static let nioCore: Self = .product(name: "NIOCore", package: "swift-nio")
    static let crypto: Self = .product(name: "Crypto", package: "swift-crypto")
    static let nioPosix: Self = .product(name: "NIOPosix", package: "swift-nio")
    static let nioSSL: Self = .product(name: "NIOSSL", package: "swift-nio-ssl")
    static let hummingbird: Self = .product(name: "Hummingbird", package: "hummingbird")
    static let argumentParser: Self = .product(name: "ArgumentParser", package: "swift-argument-parser")
    static let tracing: Self = .product(name: "Tracing", package: "swift-distributed-tracing")
    static let nioHTTP1: Self = .product(name: "NIOHTTP1", package: "swift-nio")
    static let nioHPACK: Self = .product(name: "NIOHPACK", package: "swift-nio-http2")
    static let asyncHTTPClient: Self = .product(name: "AsyncHTTPClient", package: "async-http-client")
    static let cryptoExtras: Self = .product(name: "_CryptoExtras", package: "swift-crypto")
    static let heapModule: Self = .product(name: "HeapModule", package: "swift-collections")
    static let x509: Self = .product(name: "X509", package: "swift-certificates")
    static let swiftASN1: Self = .product(name: "SwiftASN1", package: "swift-asn1")
    static let prometheus: Self = .product(name: "Prometheus", package: "swift-prometheus")
    static let nioTLS: Self = .product(name: "NIOTLS", package: "swift-nio")
    static let nioHTTP2: Self = .product(name: "NIOHTTP2", package: "swift-nio-http2")
    static let hummingbirdCore: Self = .product(name: "HummingbirdCore", package: "hummingbird")
    static let dequeModule: Self = .product(name: "DequeModule", package: "swift-collections")
    static let otel: Self = .product(name: "OTel", package: "swift-otel")
    static let nioHTTPTypes: Self = .product(name: "NIOHTTPTypes", package: "swift-nio-extras")
    static let httpTypes: Self = .product(name: "HTTPTypes", package: "swift-http-types")
    static let subprocess: Self = .product(name: "Subprocess", package: "swift-subprocess")
}

let package = Package(
    name: "callpush",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "callpush", targets: ["callpush"]),
        .executable(name: "apns-simulator", targets: ["apns-simulator"]),
        .executable(name: "fcm-simulator", targets: ["fcm-simulator"]),
        .executable(name: "push-worker", targets: ["push-worker"]),
        .executable(name: "callpush-bench", targets: ["callpush-bench"]),
        .executable(name: "dispatch", targets: ["dispatch-main"]),
        .library(name: "DispatchService", targets: ["DispatchService"]),
        .library(name: "CallContract", targets: ["CallContract"]),
        .library(name: "Kafka", targets: ["Kafka"]),
        .library(name: "APNs", targets: ["APNs"]),
        .library(name: "APNsSimulator", targets: ["APNsSimulator"]),
        .library(name: "FCM", targets: ["FCM"]),
        .library(name: "FCMSimulator", targets: ["FCMSimulator"]),
        .executable(name: "callpush-campaign", targets: ["callpush-campaign"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.30.0"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.36.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.10.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.10.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swiftlang/swift-subprocess.git", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.0"),
        // OTLP over HTTP only (http/protobuf, the OTLP default, and http/json): the gRPC exporter
        // would add grpc-swift to every build for a transport every collector also serves over HTTP.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // MARK: C binding
        .systemLibrary(
            name: "CRdKafka",
            path: "Shared/CRdKafka",
            pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"])]
        ),

        // MARK: Libraries
        // Small shared primitives: a pthread-backed lock (ThreadSanitizer sees it; see
        // Shared/Locking/Locked.swift), a memo, a one-shot value to wait for, random UUIDs without
        // `/dev/urandom`, hex digits and encoding, `Duration` in seconds and milliseconds, exponential
        // backoff with jitter.
        .target(name: "Locking", path: "Shared/Locking"),
        // The APNs model shared by the contract, the client and the simulator (APNSwift's APNSCore).
        .target(name: "APNsCore", path: "Shared/APNsCore"),
        // JSON's byte-level grammar (whitespace, literals, escapes, numbers) for the hand-written
        // readers of the contract and both simulators: standard library only (hex digits from Locking).
        .target(name: "JSONBytes", dependencies: ["Locking"], path: "Shared/JSONBytes"),
        .target(
            name: "CallContract",
            dependencies: ["Locking", "APNsCore", "JSONBytes", .crypto],
            path: "Shared/CallContract"
        ),
        .target(
            name: "CallpushCore",
            dependencies: [
                "CallContract", "Locking",
                .crypto,
            ],
            path: "Shared/CallpushCore"
        ),
        // TSan builds only (empty otherwise): lets ThreadSanitizer see librdkafka's threads in
        // every program that links the Kafka layer (see shim.c).
        .target(name: "CThreadsTSanShim", path: "Shared/CThreadsTSanShim"),
        .target(
            name: "Kafka",
            dependencies: ["Locking",
                "CRdKafka", "CThreadsTSanShim",
                .heapModule,
                .logging,
                .serviceLifecycle,
            ],
            path: "Shared/Kafka"
        ),
        // What both push clients (APNs, FCM) need alike: shutdown drain bookkeeping, extra TLS
        // trust roots, base64url for their JWTs.
        .target(
            name: "PushClientSupport",
            dependencies: ["Locking",
                .logging,
                .nioCore,
                .nioPosix,
                .nioSSL,
            ],
            path: "Shared/PushClientSupport"
        ),
        .target(
            name: "APNs",
            dependencies: ["Locking", "APNsCore", "PushClientSupport",
                .nioCore,
                .nioHTTP2,
                .nioHPACK,
                .nioPosix,
                .nioTLS,
                .nioSSL,
                .crypto,
                .logging,
                .serviceLifecycle,
            ],
            path: "Shared/APNs"
        ),
        .target(
            name: "HTTP2Wire",
            dependencies: [
                .nioCore,
                .nioHPACK,
            ],
            path: "Shared/HTTP2Wire"
        ),
        .target(
            name: "APNsSimulator",
            dependencies: ["Locking", "APNsCore", "HTTP2Wire", "SimulatorSupport", "JSONBytes",
                .nioCore,
                .nioPosix,
                .nioSSL,
                .crypto,
                .nioHPACK,
                .nioHTTP1,
                .x509,
                .swiftASN1,
                .hummingbird,
                .logging,
                .serviceLifecycle,
            ],
            path: "Shared/APNsSimulator"
        ),

        // The TLS identity (a CA and a server certificate) both simulators generate for themselves.
        .target(
            name: "SimulatorSupport",
            dependencies: [
                .nioSSL,
                .crypto,
                .x509,
                .swiftASN1,
            ],
            path: "Shared/SimulatorSupport"
        ),
        // FCM HTTP v1 client (Android rings): AsyncHTTPClient over HTTP/2, OAuth2 service-account tokens.
        .target(
            name: "FCM",
            dependencies: ["Locking", "PushClientSupport",
                .asyncHTTPClient,
                .nioCore,
                .nioPosix,
                .nioHTTP1,
                .nioSSL,
                .crypto,
                .cryptoExtras,
                .logging,
                .serviceLifecycle,
            ],
            path: "Shared/FCM"
        ),
        .target(
            name: "FCMSimulator",
            dependencies: ["Locking", "SimulatorSupport", "HTTP2Wire", "JSONBytes",
                .hummingbird,
                .hummingbirdCore,
                .nioTLS,
                .nioHPACK,
                .nioCore,
                .nioPosix,
                .nioSSL,
                .crypto,
                .cryptoExtras,
                .logging,
                .serviceLifecycle,
            ],
            path: "Shared/FCMSimulator"
        ),

        // One trace per call: W3C trace context in Kafka and HTTP headers, the OTLP exporter set up
        // from the standard OTEL_* variables (off by default), and the local trace store of `callpush dev`.
        .target(
            name: "CallTracing",
            dependencies: ["Kafka", "CallpushCore", "Locking",
                .tracing,
                .hummingbird,
                .logging,
                .serviceLifecycle,
            ] + (withOTLP ? [.otel] : []),
            path: "Shared/CallTracing",
            swiftSettings: withOTLP ? [.define("CALLPUSH_OTLP")] : []
        ),

        // MARK: Services (libraries behind the programs, so tests call the same builders)
        .target(
            name: "PushWorker",
            dependencies: ["Locking",
                "CallContract", "CallpushCore", "Kafka", "APNs", "FCM", "CallTracing", "PushClientSupport",
                .nioCore,
                .nioPosix,
                .tracing,
                .dequeModule,
                .heapModule,
                .prometheus,
                .hummingbird,
                .logging,
                .serviceLifecycle,
            ],
            path: "Services/PushWorker"
        ),

        .target(
            name: "DispatchService",
            dependencies: ["Locking",
                "CallContract", "CallpushCore", "Kafka", "CallTracing",
                .tracing,
                .dequeModule,
                .heapModule,
                .prometheus,
                .hummingbird,
                .hummingbirdCore,
                .nioCore,
                .nioPosix,
                .nioHTTP1,
                .nioHTTPTypes,
                .nioSSL,
                .httpTypes,
                .asyncHTTPClient,
                .crypto,
                .logging,
                .serviceLifecycle,
            ],
            path: "Services/DispatchService"
        ),

        .target(
            name: "CallpushCLI",
            dependencies: ["Locking",
                "Kafka", "CallContract", "CallpushCore", "APNs", "APNsSimulator", "FCM", "FCMSimulator", "PushWorker", "DispatchService", "CallTracing",
                .tracing,
                .hummingbird,
                .argumentParser,
                .logging,
                .serviceLifecycle,
                .nioCore,
                .nioPosix,
                .nioHTTP1,
                .nioSSL,
            ],
            path: "Services/CallpushCLI"
        ),

        // The command-line options both simulator programs share.
        .target(
            name: "SimulatorCommand",
            dependencies: ["SimulatorSupport",
                .argumentParser,
                .logging,
                .nioPosix,
                .serviceLifecycle,
            ],
            path: "Services/SimulatorCommand"
        ),

        // MARK: Programs (thin mains)
        .executableTarget(
            name: "callpush",
            dependencies: ["CallpushCLI", .argumentParser],
            path: "Services/callpush"
        ),
        .executableTarget(
            name: "push-worker",
            dependencies: [
                "PushWorker", "CallpushCore", "CallTracing",
                .logging,
                .serviceLifecycle,
            ],
            path: "Services/push-worker",
            // jemalloc instead of glibc's malloc: 6–18 % less CPU per ring (docs/benchmarks.md,
            // "Allocator"). Linked into the program, not its library, so tests keep glibc's.
            linkerSettings: [.linkedLibrary("jemalloc", .when(platforms: [.linux]))]
        ),
        // The module is not called `dispatch`: that clashes with libdispatch at run time.
        .executableTarget(
            name: "dispatch-main",
            dependencies: [
                "DispatchService", "CallTracing",
                .logging,
                .serviceLifecycle,
            ],
            path: "Services/dispatch",
            // jemalloc instead of glibc's malloc, as push-worker: 13–26 % less CPU per POST
            // (docs/benchmarks.md, "Allocator").
            linkerSettings: [.linkedLibrary("jemalloc", .when(platforms: [.linux]))]
        ),
        .executableTarget(
            name: "apns-simulator",
            dependencies: [
                "APNsSimulator", "SimulatorCommand",
                .argumentParser,
                .logging,
                .serviceLifecycle,
            ],
            path: "Services/apns-simulator"
        ),
        .executableTarget(
            name: "fcm-simulator",
            dependencies: [
                "FCMSimulator", "SimulatorCommand",
                .argumentParser,
                .logging,
                .serviceLifecycle,
            ],
            path: "Services/fcm-simulator"
        ),
        .executableTarget(
            name: "callpush-bench",
            dependencies: ["Locking", "ProcessStack",
                "Kafka", "APNs", "APNsSimulator", "CallContract", "CallpushCore", "PushWorker", "DispatchService",
                "FCM", "FCMSimulator",
                .asyncHTTPClient,
                .nioCore,
                .nioPosix,
                .argumentParser,
                .logging,
                .serviceLifecycle,
            ],
            path: "Benchmarks/callpush-bench"
        ),

        // Child processes, their generated keys and config files, ports, loopback HTTP and /proc
        // samples: what the campaign and the process benchmarks (`callpush-bench drain`) share.
        .target(
            name: "ProcessStack",
            dependencies: ["Locking", .crypto],
            path: "Benchmarks/ProcessStack"
        ),

        .executableTarget(
            name: "callpush-campaign",
            dependencies: ["Locking", "ProcessStack",
                "Kafka", "CallContract", "FCMSimulator",
                .crypto,
                .argumentParser,
                .logging,
            ],
            path: "Benchmarks/callpush-campaign"
        ),

        // MARK: Tests
        // Helpers shared by the test targets (child processes, ports).
        .target(
            name: "CallpushTestSupport",
            dependencies: ["Locking",
                "Kafka",
                .logging,
                .serviceLifecycle,
                .subprocess,
            ],
            path: "Tests/CallpushTestSupport"
        ),
        .testTarget(name: "CallContractTests", dependencies: ["CallContract", "Locking"], path: "Tests/CallContractTests"),
        .testTarget(name: "CallpushCoreTests", dependencies: ["CallpushCore"], path: "Tests/CallpushCoreTests"),
        .testTarget(
            name: "CallTracingTests",
            dependencies: ["CallTracing", "Kafka", "CallpushCore", "CallpushTestSupport",
                .tracing,
                .logging,
            ],
            path: "Tests/CallTracingTests"
        ),
        .testTarget(
            name: "PushWorkerTests",
            dependencies: ["Locking", "PushWorker", "Kafka", "CallContract", "CallpushCore", "APNs", "APNsSimulator", "FCM", "FCMSimulator", "CallpushTestSupport",
                           "CallTracing", .tracing, .nioPosix, .serviceLifecycle, .logging],
            path: "Tests/PushWorkerTests"
        ),
        .testTarget(
            name: "CallpushCLITests",
            dependencies: ["Locking",
                "CallpushCLI", "Kafka", "CallContract", "APNsSimulator", "FCMSimulator", "CallpushTestSupport", "CallTracing",
                .argumentParser,
                .serviceLifecycle,
                .hummingbird,
            ],
            path: "Tests/CallpushCLITests"
        ),
        .testTarget(
            name: "DispatchTests",
            dependencies: ["Locking",
                "DispatchService", "PushWorker", "Kafka", "CallContract", "CallpushCore", "APNs", "APNsSimulator", "CallpushTestSupport",
                "CallTracing",
                .tracing,
                .hummingbird,
                .asyncHTTPClient,
                .nioSSL,
                .nioCore,
                .nioPosix,
                .nioHTTP1,
                .crypto,
                .logging,
                .serviceLifecycle,
            ],
            path: "Tests/DispatchTests"
        ),
        .testTarget(name: "KafkaTests", dependencies: ["Locking", "Kafka", "CallpushTestSupport"], path: "Tests/KafkaTests"),
        .testTarget(name: "APNsTests", dependencies: ["Locking", "APNs", "APNsSimulator", "CallpushTestSupport", .nioSSL], path: "Tests/APNsTests"),
        .testTarget(
            name: "HTTP2WireTests",
            dependencies: [
                "HTTP2Wire", "CallpushTestSupport",
                .nioCore,
                .nioHPACK,
            ],
            path: "Tests/HTTP2WireTests"
        ),
        .testTarget(
            name: "APNsSimulatorTests",
            dependencies: ["Locking",
                "APNsSimulator", "APNs", "CallpushTestSupport",
                .nioCore,
                .nioPosix,
                .nioSSL,
                .nioHTTP2,
                .nioHPACK,
                .crypto,
                .logging,
            ],
            path: "Tests/APNsSimulatorTests",
            exclude: ["aioapns"]
        ),
        .testTarget(
            name: "FCMTests",
            dependencies: ["Locking", "FCM", "FCMSimulator", "CallpushTestSupport",
                .asyncHTTPClient,
                .nioCore,
                .nioPosix,
                .crypto,
                .cryptoExtras,
                .logging,
            ],
            path: "Tests/FCMTests"
        ),
        .testTarget(
            name: "FCMSimulatorTests",
            dependencies: ["FCMSimulator", "CallpushTestSupport",
                .asyncHTTPClient,
                .nioCore,
                .nioHTTP1,
                .nioPosix,
                .nioSSL,
                .crypto,
                .cryptoExtras,
                .logging,
            ],
            path: "Tests/FCMSimulatorTests",
            exclude: ["firebase_admin"]
        ),
    ]
)
