import Foundation
import Hummingbird
import Locking
import Logging
import ServiceLifecycle

/// A local OTLP/HTTP receiver keeping what it receives in a ``TraceStore``:
/// `callpush dev` runs one on 127.0.0.1 and exports its spans to it, and `callpush status
/// <callId> --trace` reads a call's spans back, so a developer sees where a call's time went
/// without a tracing backend.
///
/// - `POST /v1/traces`: an OTLP `ExportTraceServiceRequest`, binary protobuf (`http/protobuf`,
///   what `callpush dev` exports) or JSON (`http/json`), uncompressed; 415 for another encoding
///   or a compressed body, 413 beyond `maxBodyBytes`, 400 when it does not decode.
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
    private let lifecycle = Locked(Lifecycle())

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

    /// The bound port, once started (nil again once stopped).
    public var port: Int? { lifecycle.withLock { $0.port } }

    /// The base URL (`http://host:port`), once started.
    public var baseURL: String? { port.map { "http://\(host):\($0)" } }

    /// Where exporters send traces, once started.
    public var tracesURL: String? { baseURL.map { $0 + "/v1/traces" } }

    /// Listens; returns the bound port. Concurrent calls share one listener; a call while a stop
    /// is under way waits for it, then listens anew. Throws when the address cannot be bound (a
    /// later call tries again).
    @discardableResult
    public func start() async throws -> Int {
        while true {
            let action = lifecycle.withLock { $0.start(binding: { Task { try await self.listen() } }) }
            switch action {
            case .waitForStop(let stopping):
                await stopping.value
                lifecycle.withLock { $0.stopped(stopping) }
            case .join(let starting):
                do {
                    let listener = try await starting.value
                    lifecycle.withLock { $0.listening(starting, port: listener.port) }
                    return listener.port
                } catch {
                    lifecycle.withLock { $0.failed(starting) }
                    throw error
                }
            }
        }
    }

    /// Stops listening (waiting for a start under way first). Idempotent.
    public func stop() async {
        let stopping = lifecycle.withLock {
            $0.stop(stopping: { starting in
                Task {
                    guard let listener = try? await starting.value else { return }
                    await listener.group.triggerGracefulShutdown()
                    await listener.task.value
                }
            })
        }
        guard let stopping else { return }
        await stopping.value
        lifecycle.withLock { $0.stopped(stopping) }
    }

    /// Binds the address and serves until the group shuts down.
    private func listen() async throws -> Listener {
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
            return Listener(group: group, task: task, port: port)
        }
        throw failure.withLock { $0 } ?? TraceCollectorError("the trace collector did not start on \(host):\(requestedPort)")
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
            let contentType = request.headers[.contentType]?.lowercased() ?? ""
            let protobuf = contentType.hasPrefix("application/x-protobuf") || contentType.hasPrefix("application/protobuf")
            guard protobuf || contentType.hasPrefix("application/json") else {
                return Self.answer(.unsupportedMediaType, json: "{\"error\":\"this collector takes OTLP/HTTP (application/x-protobuf or application/json)\"}")
            }
            guard request.headers[.contentEncoding].map({ $0.lowercased() == "identity" }) ?? true else {
                return Self.answer(.unsupportedMediaType, json: "{\"error\":\"this collector takes uncompressed exports (OTEL_EXPORTER_OTLP_COMPRESSION=none)\"}")
            }
            let body: ByteBuffer
            do {
                body = try await request.body.collect(upTo: maxBodyBytes)
            } catch {
                return Self.answer(.contentTooLarge, json: "{\"error\":\"export larger than \(maxBodyBytes) bytes\"}")
            }
            let bytes = Array(body.readableBytesView)
            let decoded = protobuf ? try? OTLPProtobuf.spans(from: bytes) : try? OTLPJSON.spans(from: Data(bytes))
            guard let spans = decoded else {
                return Self.answer(.badRequest, json: "{\"error\":\"not an OTLP export request\"}")
            }
            onExport?(Data(bytes))
            store.add(spans)
            // OTLP answers in the request's encoding: an empty ExportTraceServiceResponse.
            return protobuf ? Response(status: .ok, headers: [.contentType: "application/x-protobuf"]) : Self.answer(.ok, json: "{}")
        }
        router.get("/v1/spans") { request, _ -> Response in
            let query = request.uri.queryParameters
            let callID = query.get("callId")
            let traceIDs = Set(query.getAll("traceId").map { $0.lowercased() }.filter { $0.count == 32 && $0.allSatisfy(\.isHexDigit) })
            let spans = callID == nil && traceIDs.isEmpty ? [] : store.spans(callID: callID?.lowercased(), traceIDs: traceIDs)
            let json = (try? JSONEncoder().encode(spans)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
            return Self.answer(.ok, json: json)
        }
        return router
    }

    private static func answer(_ status: HTTPResponse.Status, json: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: json)))
    }
}

/// A running listener: its service group, the task running it, the port it bound.
private struct Listener: Sendable {
    var group: ServiceGroup
    var task: Task<Void, Never>
    var port: Int
}

/// The collector's start/stop state. A start under way or done is one task every caller of
/// `start()` awaits, so concurrent starts bind once; a stop takes that task (waiting for it
/// when it is still binding) and leaves the state idle, so a later start binds again.
private struct Lifecycle {
    private enum Phase {
        case idle
        case started(Task<Listener, any Error>, port: Int?)
        case stopping(Task<Void, Never>)
    }
    private var phase = Phase.idle

    var port: Int? {
        if case .started(_, let port) = phase { return port }
        return nil
    }

    enum StartAction {
        /// Await this start (new or under way) for the port.
        case join(Task<Listener, any Error>)
        /// A stop is under way: await it, then start again.
        case waitForStop(Task<Void, Never>)
    }

    mutating func start(binding bind: () -> Task<Listener, any Error>) -> StartAction {
        switch phase {
        case .idle:
            let starting = bind()
            phase = .started(starting, port: nil)
            return .join(starting)
        case .started(let starting, _):
            return .join(starting)
        case .stopping(let stopping):
            return .waitForStop(stopping)
        }
    }

    mutating func listening(_ starting: Task<Listener, any Error>, port: Int) {
        if case .started(starting, _) = phase { phase = .started(starting, port: port) }
    }

    /// The start could not bind: the next start tries afresh.
    mutating func failed(_ starting: Task<Listener, any Error>) {
        if case .started(starting, _) = phase { phase = .idle }
    }

    /// The task that stops the listener (nil when there is nothing to stop).
    mutating func stop(stopping makeStop: (Task<Listener, any Error>) -> Task<Void, Never>) -> Task<Void, Never>? {
        switch phase {
        case .idle:
            return nil
        case .stopping(let stopping):
            return stopping
        case .started(let starting, _):
            let stopping = makeStop(starting)
            phase = .stopping(stopping)
            return stopping
        }
    }

    mutating func stopped(_ stopping: Task<Void, Never>) {
        if case .stopping(stopping) = phase { phase = .idle }
    }
}

/// The trace collector could not start.
public struct TraceCollectorError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
