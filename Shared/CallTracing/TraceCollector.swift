import Foundation
import Hummingbird
import Locking
import Logging
import ServiceLifecycle

/// A local OTLP/HTTP receiver (JSON encoding) keeping what it receives in a ``TraceStore``:
/// `callpush dev` runs one on 127.0.0.1 and exports its spans to it, and `callpush status
/// <callId> --trace` reads a call's spans back, so a developer sees where a call's time went
/// without a tracing backend.
///
/// - `POST /v1/traces`: an OTLP `ExportTraceServiceRequest` as JSON (`http/json`); 415 for
///   another encoding, 413 beyond `maxBodyBytes`, 400 when it does not decode.
/// - `GET /v1/spans?callId=<id>&traceId=<hex>…`: the spans ``TraceStore/spans(callID:traceIDs:)``
///   finds, as a JSON array of ``CollectedSpan``.
///
/// It is meant for loopback: it has no authentication (it holds only span data, which callpush
/// keeps free of tokens and secrets).
public final class TraceCollector: Service, Sendable {
    public let store: TraceStore
    private let host: String
    private let requestedPort: Int
    private let maxBodyBytes: Int
    private let onExport: (@Sendable (Data) -> Void)?
    private let logger: Logger
    private struct Running: Sendable {
        var group: ServiceGroup
        var task: Task<Void, Never>
        var port: Int
    }
    private let running = Locked<Running?>(nil)

    /// A collector for `host:port` (port 0: any free port). `onExport` sees every accepted body
    /// as received (tests check what left the services).
    public init(store: TraceStore = TraceStore(), host: String = "127.0.0.1", port: Int = 4318, maxBodyBytes: Int = 8 << 20,
                onExport: (@Sendable (Data) -> Void)? = nil, logger: Logger) {
        self.store = store
        self.host = host
        self.requestedPort = port
        self.maxBodyBytes = maxBodyBytes
        self.onExport = onExport
        self.logger = logger
    }

    /// The bound port, once started.
    public var port: Int? { running.withLock { $0?.port } }

    /// The base URL (`http://host:port`), once started.
    public var baseURL: String? { port.map { "http://\(host):\($0)" } }

    /// Where exporters send traces, once started.
    public var tracesURL: String? { baseURL.map { $0 + "/v1/traces" } }

    /// Listens; returns the bound port. Throws when the address cannot be bound.
    @discardableResult
    public func start() async throws -> Int {
        if let port { return port }
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let application = Application(router: router(), configuration: .init(address: .hostname(host, port: requestedPort)),
                                      onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }, logger: logger)
        let group = ServiceGroup(services: [application], logger: logger)
        let failure = Locked<(any Error)?>(nil)
        let task = Task {
            do { try await group.run() } catch { failure.withLock { $0 = error } }
            continuation.finish()
        }
        for await port in ports {
            running.withLock { $0 = Running(group: group, task: task, port: port) }
            return port
        }
        throw failure.withLock { $0 } ?? TraceCollectorError("the trace collector did not start on \(host):\(requestedPort)")
    }

    /// Stops listening. Idempotent.
    public func stop() async {
        guard let running = running.withLock({ $0 }) else { return }
        await running.group.triggerGracefulShutdown()
        await running.task.value
    }

    /// Starts (if needed) and runs until graceful shutdown or cancellation, then stops.
    public func run() async throws {
        try await start()
        try? await gracefulShutdown()
        await stop()
    }

    private func router() -> Router<BasicRequestContext> {
        let router = Router()
        let store = store, maxBodyBytes = maxBodyBytes, onExport = onExport
        router.post("/v1/traces") { request, _ -> Response in
            guard request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
                return Self.answer(.unsupportedMediaType, "{\"error\":\"this collector takes OTLP/HTTP JSON only (OTEL_EXPORTER_OTLP_PROTOCOL=http/json)\"}")
            }
            let body: ByteBuffer
            do {
                body = try await request.body.collect(upTo: maxBodyBytes)
            } catch {
                return Self.answer(.contentTooLarge, "{\"error\":\"export larger than \(maxBodyBytes) bytes\"}")
            }
            let data = Data(body.readableBytesView)
            guard let spans = try? OTLPJSON.spans(from: data) else {
                return Self.answer(.badRequest, "{\"error\":\"not an OTLP JSON export request\"}")
            }
            onExport?(data)
            store.add(spans)
            return Self.answer(.ok, "{}")
        }
        router.get("/v1/spans") { request, _ -> Response in
            let query = request.uri.queryParameters
            let callID = query.get("callId")
            let traceIDs = Set(query.getAll("traceId").map { $0.lowercased() }.filter { $0.count == 32 && $0.allSatisfy(\.isHexDigit) })
            let spans = callID == nil && traceIDs.isEmpty ? [] : store.spans(callID: callID?.lowercased(), traceIDs: traceIDs)
            let json = (try? JSONEncoder().encode(spans)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
            return Self.answer(.ok, json)
        }
        return router
    }

    private static func answer(_ status: HTTPResponse.Status, _ json: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: json)))
    }
}

/// The trace collector could not start.
public struct TraceCollectorError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
