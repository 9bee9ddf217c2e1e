import CallContract
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// Posts the statuses of calls this instance accepted to a configured URL, one at a time in
/// order, each retried with exponential backoff (200 ms doubling to 10 s) up to `maxAttempts`.
/// The queue is bounded: when it is full new statuses are dropped and counted.
///
/// Each POST carries the `CallStatus` JSON with `X-Callpush-Timestamp` (Unix seconds) and
/// `X-Callpush-Signature: sha256=<hex HMAC-SHA256 over "<timestamp>.<body>">`.
public final class WebhookSender: Service {
    private let configuration: WebhookConfiguration
    private let metrics: DispatchMetrics?
    private let logger: Logger
    private let stream: AsyncStream<CallStatus>
    private let continuation: AsyncStream<CallStatus>.Continuation

    public init(configuration: WebhookConfiguration, metrics: DispatchMetrics?, logger: Logger) {
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        (stream, continuation) = AsyncStream<CallStatus>.makeStream(bufferingPolicy: .bufferingOldest(configuration.queueCapacity))
    }

    /// Queues a status (dropped and counted when the queue is full).
    public func enqueue(_ status: CallStatus) {
        if case .dropped = continuation.yield(status) { metrics?.webhook("dropped") }
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            for await status in stream {
                await deliver(status)
            }
        } onGracefulShutdown: { [continuation] in
            continuation.finish()
        }
    }

    private func deliver(_ status: CallStatus) async {
        guard let body = try? status.encoded() else { return }
        var delay = Duration.milliseconds(200)
        for attempt in 1...max(1, configuration.maxAttempts) {
            let timestamp = String(Int(Date().timeIntervalSince1970))
            let signature = Self.signature(secret: configuration.secret, timestamp: timestamp, body: body)
            let code = await DispatchProducer.bounded(configuration.timeout) { [configuration] in
                try await Self.post(url: configuration.url, body: body, headers: [
                    ("X-Callpush-Timestamp", timestamp), ("X-Callpush-Signature", "sha256=" + signature),
                ])
            }
            if case .success(let status)? = code, (200..<300).contains(status) {
                metrics?.webhook("delivered")
                return
            }
            if attempt < configuration.maxAttempts {
                metrics?.webhook("retried")
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(10))
            }
        }
        metrics?.webhook("failed")
        logger.warning("webhook not delivered", metadata: ["call.id": "\(status.callId)", "call.state": "\(status.state.rawValue)"])
    }

    /// Hex HMAC-SHA256 over `"<timestamp>.<body>"`.
    public static func signature(secret: [UInt8], timestamp: String, body: Data) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Array(timestamp.utf8) + [UInt8(ascii: ".")] + Array(body),
                                                  using: SymmetricKey(data: secret))
        return mac.map { String(format: "%02x", $0) }.joined()
    }

    /// One HTTP/1.1 POST; returns the response status code.
    static func post(url: URL, body: Data, headers extra: [(String, String)]) async throws -> Int {
        guard let host = url.host, url.scheme == "http" else { throw WebhookError(code: "unsupported-url") }
        let port = url.port ?? 80
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: url.path.isEmpty ? "/" : url.path)
            head.headers.add(name: "Host", value: port == 80 ? host : "\(host):\(port)")
            head.headers.add(name: "Content-Type", value: "application/json")
            head.headers.add(name: "Content-Length", value: String(body.count))
            head.headers.add(name: "Connection", value: "close")
            for (name, value) in extra { head.headers.add(name: name, value: value) }
            try await outbound.write(.head(head))
            try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body))))
            try await outbound.write(.end(nil))
            for try await part in inbound {
                if case .head(let response) = part { return Int(response.status.code) }
            }
            throw WebhookError(code: "no-response")
        }
    }
}

/// A webhook POST that did not get an answer.
public struct WebhookError: Error, Sendable, Hashable {
    /// `unsupported-url`, `no-response`.
    public var code: String
    /// Worth another attempt.
    public var isRetryable: Bool { code != "unsupported-url" }
}
