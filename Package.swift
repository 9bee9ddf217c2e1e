// swift-tools-version: 6.1
import PackageDescription

// The ThreadSanitizer build (scripts/tsan sets CALLPUSH_WITHOUT_OTLP) leaves swift-otel out: Swift
// 6.3.1 refuses to compile swift-otel 1.6.0's OTelBatchSpanProcessor with -sanitize=thread ("sending
// 'logger' risks causing data races"), and the sanitized suites export no spans. Every other build
// has the OTLP exporter.
let withOTLP = Context.environment["CALLPUSH_WITHOUT_OTLP"] == nil

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
        // Shared/Locking/Locked.swift), a memo, random UUIDs without `/dev/urandom`.
        .target(name: "Locking", path: "Shared/Locking"),
        // The APNs model shared by the contract, the client and the simulator (APNSwift's APNSCore).
        .target(name: "APNsCore", path: "Shared/APNsCore"),
        .target(
            name: "CallContract",
            dependencies: ["Locking", "APNsCore"],
            path: "Shared/CallContract"
        ),
        .target(
            name: "CallpushCore",
            dependencies: [
                "CallContract",
                .product(name: "Crypto", package: "swift-crypto"),
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
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Shared/Kafka"
        ),
        // What both push clients (APNs, FCM) need alike: shutdown drain bookkeeping, extra TLS
        // trust roots, base64url for their JWTs.
        .target(
            name: "PushClientSupport",
            dependencies: ["Locking",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Shared/PushClientSupport"
        ),
        .target(
            name: "APNs",
            dependencies: ["Locking", "APNsCore", "PushClientSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Shared/APNs"
        ),
        .target(
            name: "HTTP2Wire",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            path: "Shared/HTTP2Wire"
        ),
        .target(
            name: "APNsSimulator",
            dependencies: ["Locking", "APNsCore", "HTTP2Wire", "SimulatorSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Shared/APNsSimulator"
        ),

        // The TLS identity (a CA and a server certificate) both simulators generate for themselves.
        .target(
            name: "SimulatorSupport",
            dependencies: [
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            path: "Shared/SimulatorSupport"
        ),
        // FCM HTTP v1 client (Android rings): AsyncHTTPClient over HTTP/2, OAuth2 service-account tokens.
        .target(
            name: "FCM",
            dependencies: ["Locking", "PushClientSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Shared/FCM"
        ),
        .target(
            name: "FCMSimulator",
            dependencies: ["Locking", "SimulatorSupport", "HTTP2Wire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Shared/FCMSimulator"
        ),

        // One trace per call: W3C trace context in Kafka and HTTP headers, the OTLP exporter set up
        // from the standard OTEL_* variables (off by default), and the local trace store of `callpush dev`.
        .target(
            name: "CallTracing",
            dependencies: ["Kafka", "CallpushCore", "Locking",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ] + (withOTLP ? [.product(name: "OTel", package: "swift-otel")] : []),
            path: "Shared/CallTracing",
            swiftSettings: withOTLP ? [.define("CALLPUSH_OTLP")] : []
        ),

        // MARK: Services (libraries behind the programs, so tests call the same builders)
        .target(
            name: "PushWorker",
            dependencies: ["Locking",
                "CallContract", "CallpushCore", "Kafka", "APNs", "FCM", "CallTracing",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Services/PushWorker"
        ),

        .target(
            name: "DispatchService",
            dependencies: ["Locking",
                "CallContract", "CallpushCore", "Kafka", "CallTracing",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Services/DispatchService"
        ),

        .target(
            name: "CallpushCLI",
            dependencies: ["Locking",
                "Kafka", "CallContract", "CallpushCore", "APNs", "APNsSimulator", "FCM", "FCMSimulator", "PushWorker", "DispatchService", "CallTracing",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Services/CallpushCLI"
        ),

        // The command-line options both simulator programs share.
        .target(
            name: "SimulatorCommand",
            dependencies: [
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Services/SimulatorCommand"
        ),

        // MARK: Programs (thin mains)
        .executableTarget(
            name: "callpush",
            dependencies: ["CallpushCLI", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Services/callpush"
        ),
        .executableTarget(
            name: "push-worker",
            dependencies: [
                "PushWorker", "CallpushCore", "CallTracing",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Services/push-worker"
        ),
        // The module is not called `dispatch`: that clashes with libdispatch at run time.
        .executableTarget(
            name: "dispatch-main",
            dependencies: [
                "DispatchService", "CallTracing",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Services/dispatch"
        ),
        .executableTarget(
            name: "apns-simulator",
            dependencies: [
                "APNsSimulator", "SimulatorCommand",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Services/apns-simulator"
        ),
        .executableTarget(
            name: "fcm-simulator",
            dependencies: [
                "FCMSimulator", "SimulatorCommand",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Services/fcm-simulator"
        ),
        .executableTarget(
            name: "callpush-bench",
            dependencies: ["Locking", "ProcessStack",
                "Kafka", "APNs", "APNsSimulator", "CallContract", "CallpushCore", "PushWorker", "DispatchService",
                "FCM", "FCMSimulator",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Benchmarks/callpush-bench"
        ),

        // Child processes, their generated keys and config files, ports, loopback HTTP and /proc
        // samples: what the campaign and the process benchmarks (`callpush-bench drain`) share.
        .target(
            name: "ProcessStack",
            dependencies: ["Locking", .product(name: "Crypto", package: "swift-crypto")],
            path: "Benchmarks/ProcessStack"
        ),

        .executableTarget(
            name: "callpush-campaign",
            dependencies: ["Locking", "ProcessStack",
                "Kafka", "CallContract", "FCMSimulator",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/callpush-campaign"
        ),

        // MARK: Tests
        // Helpers shared by the test targets (child processes, ports).
        .target(
            name: "CallpushTestSupport",
            dependencies: ["Locking",
                "Kafka",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/CallpushTestSupport"
        ),
        .testTarget(name: "CallContractTests", dependencies: ["CallContract"], path: "Tests/CallContractTests"),
        .testTarget(name: "CallpushCoreTests", dependencies: ["CallpushCore"], path: "Tests/CallpushCoreTests"),
        .testTarget(
            name: "CallTracingTests",
            dependencies: ["CallTracing", "Kafka", "CallpushCore",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/CallTracingTests"
        ),
        .testTarget(
            name: "PushWorkerTests",
            dependencies: ["Locking", "PushWorker", "Kafka", "CallContract", "CallpushCore", "APNs", "APNsSimulator", "FCM", "FCMSimulator", "CallpushTestSupport",
                           "CallTracing", .product(name: "Tracing", package: "swift-distributed-tracing")],
            path: "Tests/PushWorkerTests"
        ),
        .testTarget(
            name: "CallpushCLITests",
            dependencies: ["Locking",
                "CallpushCLI", "Kafka", "CallContract", "APNsSimulator", "FCMSimulator", "CallpushTestSupport", "CallTracing",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            path: "Tests/CallpushCLITests"
        ),
        .testTarget(
            name: "DispatchTests",
            dependencies: ["Locking",
                "DispatchService", "PushWorker", "Kafka", "CallContract", "CallpushCore", "APNs", "APNsSimulator", "CallpushTestSupport",
                "CallTracing",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/DispatchTests"
        ),
        .testTarget(name: "KafkaTests", dependencies: ["Locking", "Kafka", "CallpushTestSupport"], path: "Tests/KafkaTests"),
        .testTarget(name: "APNsTests", dependencies: ["Locking", "APNs", "APNsSimulator"], path: "Tests/APNsTests"),
        .testTarget(
            name: "HTTP2WireTests",
            dependencies: [
                "HTTP2Wire", "CallpushTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            path: "Tests/HTTP2WireTests"
        ),
        .testTarget(
            name: "APNsSimulatorTests",
            dependencies: ["Locking",
                "APNsSimulator", "APNs", "CallpushTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/APNsSimulatorTests",
            exclude: ["aioapns"]
        ),
        .testTarget(
            name: "FCMTests",
            dependencies: ["Locking", "FCM", "FCMSimulator", "CallpushTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/FCMTests"
        ),
        .testTarget(
            name: "FCMSimulatorTests",
            dependencies: ["FCMSimulator", "CallpushTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/FCMSimulatorTests",
            exclude: ["firebase_admin"]
        ),
    ]
)
