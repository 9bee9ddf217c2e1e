import CallContract
import CallTracing
import Foundation
import Hummingbird
import HTTPTypes
import NIOCore

/// The request context of dispatch's routes: the connection (an SSE stream closes it when a
/// write stays blocked past its limit) and the peer's address (the ack's rate limit).
public struct DispatchRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The connection the request came on.
    public let channel: (any Channel)?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    /// The peer's IP address (a proxy's, behind one).
    var peerAddress: String? { channel?.remoteAddress?.ipAddress }
}

extension DispatchAPI {
    /// The routes and the methods each answers (for 405 + `Allow`); `{id}` matches one segment.
    static let routeMethods: [(pattern: [String], methods: [HTTPRequest.Method])] = [
        (["v1", "calls"], [.post]),
        (["v1", "calls", "{id}"], [.get, .delete]),
        (["v1", "calls", "{id}", "events"], [.get]),
        (["v1", "calls", "{id}", "ack"], [.post]),
        (["healthz"], [.get]),
        (["readyz"], [.get]),
    ]

    /// The router of the API plus `/healthz` and `/readyz` (`/metrics` is on its own listener,
    /// see ``metricsRouter()``). Unknown routes and methods answer problem+json.
    public func router() -> Router<DispatchRequestContext> {
        let router = Router(context: DispatchRequestContext.self)
        // Before the routes: middleware wraps only the responders added after it.
        router.add(middleware: UnmatchedRouteMiddleware())
        router.post("/v1/calls") { request, context in
            await self.traced(SpanName.ring, request) { trace in
                await self.answer("POST /v1/calls", request) { () async throws(DispatchProblem) -> (Response, String?) in
                    let key = try self.authorize(request)
                    return (try await self.ring(request, key: key, channel: context.channel, trace: trace), key.name)
                }
            }
        }
        router.delete("/v1/calls/:callId") { request, context in
            await self.traced(SpanName.cancel, request) { trace in
                await self.answer("DELETE /v1/calls/{callId}", request) { () async throws(DispatchProblem) -> (Response, String?) in
                    let key = try self.authorize(request)
                    let callId = try Self.validCallId(context.parameters.get("callId"))
                    return (try await self.cancel(request, key: key, callId: callId, channel: context.channel, trace: trace), key.name)
                }
            }
        }
        router.get("/v1/calls/:callId") { request, context in
            await self.answer("GET /v1/calls/{callId}", request) { () async throws(DispatchProblem) -> (Response, String?) in
                let key = try self.authorize(request)
                return (try self.status(key: key, callId: try Self.validCallId(context.parameters.get("callId"))), key.name)
            }
        }
        router.get("/v1/calls/:callId/events") { request, context in
            await self.answer("GET /v1/calls/{callId}/events", request) { () async throws(DispatchProblem) -> (Response, String?) in
                let key = try self.authorize(request)
                let callId = try Self.validCallId(context.parameters.get("callId"))
                return (try self.events(request, key: key, callId: callId, channel: context.channel), key.name)
            }
        }
        router.post("/v1/calls/:callId/ack") { request, context in
            await self.answer("POST /v1/calls/{callId}/ack", request) { () async throws(DispatchProblem) -> (Response, String?) in
                let callId = try Self.validCallId(context.parameters.get("callId"))
                let client = Self.clientAddress(peer: context.peerAddress, forwardedFor: request.headers[values: .xForwardedFor],
                                                trustedProxyHops: self.configuration.trustedProxyHops)
                return (try await self.ack(request, callId: callId, client: client, channel: context.channel), nil)
            }
        }
        addProbes(to: router)
        return router
    }

    /// `/metrics` (Prometheus) with `/healthz` and `/readyz`, for the operations listener.
    public func metricsRouter() -> Router<DispatchRequestContext> {
        let router = Router(context: DispatchRequestContext.self)
        router.add(middleware: UnmatchedRouteMiddleware())
        router.get("/metrics") { _, _ -> Response in
            self.metrics.setViewCalls(self.view.count)
            self.metrics.setViewBytes(self.view.bytes)
            self.metrics.setStreams(self.view.subscriberCount)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: self.metrics.exposition())))
        }
        addProbes(to: router)
        return router
    }

    private func addProbes(to router: Router<DispatchRequestContext>) {
        router.get("/healthz") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "ok\n")))
        }
        router.get("/readyz") { _, _ -> Response in
            let ready = self.isReady()
            return Response(status: ready ? .ok : .serviceUnavailable, headers: [.contentType: "text/plain"],
                            body: .init(byteBuffer: ByteBuffer(string: ready ? "ready\n" : "not ready: Kafka not reachable yet\n")))
        }
    }

    /// Runs a handler, turning problems into problem+json and recording metrics. An error
    /// answer to a request that declared a body closes the connection: the body may be unread,
    /// and reading it to the end (to reuse the connection) is what a slow or huge body wants.
    func answer(_ route: String, _ request: Request, _ body: () async throws(DispatchProblem) -> (Response, String?)) async -> Response {
        let started = ContinuousClock.now
        do {
            let (response, key) = try await body()
            metrics.request(route: route, status: response.status.code, key: key, duration: ContinuousClock.now - started)
            return response
        } catch {
            metrics.request(route: route, status: error.status, key: nil, duration: ContinuousClock.now - started)
            if error.status >= 500, let suppressed = logThrottle.admit(route) {
                logger.warning("request failed", metadata: ["http.route": "\(route)", "problem": "\(error.code)", "log.suppressed": "\(suppressed)"])
            }
            return Self.problem(error, closeConnection: request.declaresBody)
        }
    }
}

extension Request {
    /// Whether the request says a body follows.
    var declaresBody: Bool {
        if let length = headers[.contentLength] { return length != "0" }
        return headers[.transferEncoding] != nil
    }
}

extension HTTPField.Name {
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
    static let lastEventID = HTTPField.Name("Last-Event-ID")!
    static let xAccelBuffering = HTTPField.Name("X-Accel-Buffering")!
}

/// Turns the router's bare 404 into problem+json: 405 with `Allow` for a known path with another
/// method, 404 `not-found` otherwise.
struct UnmatchedRouteMiddleware: RouterMiddleware {
    typealias Context = DispatchRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let segments = request.uri.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
            let allowed = DispatchAPI.routeMethods.first { route in
                route.pattern.count == segments.count && zip(route.pattern, segments).allSatisfy { $0 == "{id}" || $0 == $1 }
            }?.methods
            let problem = allowed.map { DispatchProblem.methodNotAllowed(request.method.rawValue, allow: $0.map(\.rawValue).joined(separator: ", ")) }
                ?? DispatchProblem.routeNotFound
            return DispatchAPI.problem(problem, closeConnection: request.declaresBody)
        }
    }
}
