import Foundation
import SimulatorSupport

/// The admin HTTP API, independent of the transport: `GET/DELETE /admin/pushes`, `GET/PUT /admin/faults`,
/// `GET /admin/stats`, `GET /admin/ca`.
struct AdminAPI: Sendable {
    struct Response: Sendable {
        var status: Int
        var contentType: String
        var body: String

        static func json(_ status: Int, _ body: String) -> Response {
            Response(status: status, contentType: "application/json", body: body)
        }
        static func error(_ status: Int, _ message: String) -> Response {
            let encoded = (try? AdminJSON.encoder.encode(["error": message])).map { String(decoding: $0, as: UTF8.self) }
            return .json(status, encoded ?? #"{"error":"bad request"}"#)
        }
    }

    let core: SimulatorCore
    let caCertificatePEM: String

    func handle(method: String, uri: String, body: [UInt8]) -> Response {
        let components = URLComponents(string: uri)
        let path = components?.path ?? uri
        let query = Dictionary(
            (components?.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last }
        )
        switch (method, path) {
        case ("GET", "/admin/pushes"):
            return listPushes(query: query)
        case ("DELETE", "/admin/pushes"):
            core.state.withLock { $0.pushes.removeAll() }
            return Response(status: 204, contentType: "application/json", body: "")
        case ("GET", "/admin/faults"):
            return encode(core.faults)
        case ("PUT", "/admin/faults"):
            let faults: APNSSimulatorFaults
            do {
                faults = try AdminJSON.decoder.decode(APNSSimulatorFaults.self, from: Data(body))
                try faults.validate()
            } catch let error as APNSSimulatorError {
                return .error(400, error.message)
            } catch {
                return .error(400, "faults JSON not understood: \(error)")
            }
            core.setFaults(faults)
            return encode(core.faults)
        case ("GET", "/admin/stats"):
            return encode(core.state.withLock { $0.currentStats })
        case ("GET", "/admin/ca"):
            return Response(status: 200, contentType: "application/x-pem-file", body: caCertificatePEM)
        case (_, "/admin/pushes"), (_, "/admin/faults"), (_, "/admin/stats"), (_, "/admin/ca"):
            return .error(405, "method \(method) not allowed on \(path)")
        default:
            return .error(404, "no such endpoint: \(path)")
        }
    }

    private func listPushes(query: [String: String]) -> Response {
        var pushes = core.state.withLock { $0.pushes.elements }
        if let token = query["token"], !token.isEmpty {
            let wanted = token.lowercased()
            pushes.removeAll { $0.deviceToken != wanted }
        }
        if let since = query["since"], !since.isEmpty {
            guard let date = AdminJSON.parseDate(since) else {
                return .error(400, "since must be an ISO 8601 date or milliseconds since 1970")
            }
            pushes.removeAll { $0.receivedAt < date }
        }
        return encode(pushes.map(\.recorded))
    }

    private func encode(_ value: some Encodable) -> Response {
        do {
            return .json(200, String(decoding: try AdminJSON.encoder.encode(value), as: UTF8.self))
        } catch {
            return .error(500, "encoding failed")
        }
    }
}

/// JSON coding of the admin API (shared with the FCM simulator's: ``SimulatorJSON``).
typealias AdminJSON = SimulatorJSON
