import Foundation
import Hummingbird
import SimulatorSupport

/// The admin HTTP/1.1 API: `GET/DELETE /admin/messages`, `GET/PUT /admin/faults`, `GET /admin/stats`,
/// `GET /admin/ca`, `GET /admin/service-account`, `POST/DELETE /admin/access-tokens`.
enum FCMAdminRouter {
    static let maximumBody = 1 << 20

    static func make(simulator: FCMSimulator) -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/admin/messages") { request, _ -> Response in
            var messages = simulator.messages()
            if let token = request.uri.queryParameters["token"].map(String.init), !token.isEmpty {
                messages.removeAll { $0.token != token }
            }
            if let since = request.uri.queryParameters["since"].map(String.init), !since.isEmpty {
                guard let date = SimulatorJSON.parseDate(since) else {
                    return error(400, "since must be an ISO 8601 date or milliseconds since 1970")
                }
                messages.removeAll { $0.receivedAt < date }
            }
            return encode(messages)
        }
        router.delete("/admin/messages") { _, _ -> Response in
            simulator.resetMessages()
            return Response(status: .noContent)
        }
        router.get("/admin/faults") { _, _ -> Response in encode(simulator.faults) }
        router.put("/admin/faults") { request, _ -> Response in
            guard let body = try? await request.body.collect(upTo: maximumBody) else { return error(413, "body larger than 1 MiB") }
            let faults: FCMSimulatorFaults
            do {
                faults = try SimulatorJSON.decoder.decode(FCMSimulatorFaults.self, from: Data(body.readableBytesView))
                try faults.validate()
            } catch let failure as FCMSimulatorError {
                return error(400, failure.message)
            } catch {
                return Self.error(400, "faults JSON not understood: \(error)")
            }
            simulator.setFaults(faults)
            return encode(simulator.faults)
        }
        router.get("/admin/stats") { _, _ -> Response in encode(simulator.stats()) }
        router.get("/admin/ca") { _, _ -> Response in
            text(simulator.caCertificatePEM, contentType: "application/x-pem-file")
        }
        router.get("/admin/service-account") { _, _ -> Response in
            guard let json = try? simulator.serviceAccountJSON() else { return error(404, "no service account with a private key") }
            return text(json, contentType: "application/json")
        }
        router.post("/admin/access-tokens") { _, _ -> Response in
            let issued = simulator.issueAccessToken()
            return encode(IssuedToken(access_token: issued.token, token_type: "Bearer", expires_in: issued.expiresInSeconds))
        }
        router.delete("/admin/access-tokens") { _, _ -> Response in
            simulator.revokeAccessTokens()
            return Response(status: .noContent)
        }
        return router
    }

    private struct IssuedToken: Encodable {
        var access_token: String
        var token_type: String
        var expires_in: Int
    }

    private static func encode(_ value: some Encodable) -> Response {
        guard let data = try? SimulatorJSON.encoder.encode(value) else { return error(500, "encoding failed") }
        return text(String(decoding: data, as: UTF8.self), contentType: "application/json")
    }

    private static func error(_ status: Int, _ message: String) -> Response {
        let data = (try? SimulatorJSON.encoder.encode(["error": message])) ?? Data(#"{"error":"bad request"}"#.utf8)
        var response = text(String(decoding: data, as: UTF8.self), contentType: "application/json")
        response.status = .init(code: status)
        return response
    }

    private static func text(_ body: String, contentType: String) -> Response {
        Response(status: .ok, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
