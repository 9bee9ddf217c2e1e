import CallContract
import Foundation
import Hummingbird
import NIOCore

extension DispatchAPI {
    /// The router of the whole API plus `/healthz`, `/readyz`, `/metrics`.
    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.post("/v1/calls") { request, _ in
            await self.answer("POST /v1/calls") { () async throws(DispatchProblem) -> (Response, String?) in
                let key = try self.authorize(request)
                return (try await self.ring(request, key: key), key.name)
            }
        }
        router.delete("/v1/calls/:callId") { request, context in
            await self.answer("DELETE /v1/calls/{callId}") { () async throws(DispatchProblem) -> (Response, String?) in
                let key = try self.authorize(request)
                let callId = try Self.validCallId(context.parameters.get("callId"))
                return (try await self.cancel(request, callId: callId), key.name)
            }
        }
        router.get("/v1/calls/:callId") { request, context in
            await self.answer("GET /v1/calls/{callId}") { () async throws(DispatchProblem) -> (Response, String?) in
                let key = try self.authorize(request)
                return (try self.status(callId: try Self.validCallId(context.parameters.get("callId"))), key.name)
            }
        }
        router.get("/v1/calls/:callId/events") { request, context in
            await self.answer("GET /v1/calls/{callId}/events") { () async throws(DispatchProblem) -> (Response, String?) in
                let key = try self.authorize(request)
                return (try self.events(callId: try Self.validCallId(context.parameters.get("callId"))), key.name)
            }
        }
        router.post("/v1/calls/:callId/ack") { request, context in
            await self.answer("POST /v1/calls/{callId}/ack") { () async throws(DispatchProblem) -> (Response, String?) in
                (try await self.ack(request, callId: try Self.validCallId(context.parameters.get("callId"))), nil)
            }
        }
        router.get("/healthz") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "ok\n")))
        }
        router.get("/readyz") { _, _ -> Response in
            let ready = self.isReady()
            return Response(status: ready ? .ok : .serviceUnavailable, headers: [.contentType: "text/plain"],
                            body: .init(byteBuffer: ByteBuffer(string: ready ? "ready\n" : "not ready: Kafka not reachable yet\n")))
        }
        router.get("/metrics") { _, _ -> Response in
            self.metrics.setViewCalls(self.view.count)
            self.metrics.setStreams(self.view.subscriberCount)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: self.metrics.exposition())))
        }
        return router
    }

    /// Runs a handler, turning problems into problem+json and recording metrics.
    func answer(_ route: String, _ body: () async throws(DispatchProblem) -> (Response, String?)) async -> Response {
        let started = ContinuousClock.now
        do {
            let (response, key) = try await body()
            metrics.request(route: route, status: response.status.code, key: key, duration: ContinuousClock.now - started)
            return response
        } catch {
            metrics.request(route: route, status: error.status, key: nil, duration: ContinuousClock.now - started)
            if error.status >= 500 {
                logger.warning("request failed", metadata: ["http.route": "\(route)", "problem": "\(error.code)"])
            }
            return Self.problem(error)
        }
    }
}
