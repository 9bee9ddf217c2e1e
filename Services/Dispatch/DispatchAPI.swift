import CallContract
import CallpushCore
import Foundation
import Hummingbird
import Kafka
import Logging
import NIOCore

/// The request handlers of the dispatch API (the routes are in `DispatchAPI+Routes.swift`).
/// Every handler answers JSON or `application/problem+json`; nothing is published for a
/// rejected request.
public final class DispatchAPI: Sendable {
    let configuration: DispatchConfiguration
    let view: StatusView
    let publisher: any EventPublishing
    let idempotency: IdempotencyStore
    let rateLimiter: RateLimiter
    let authenticator: APIKeyAuthenticator
    let ackTokens: AckTokenSigner
    let metrics: DispatchMetrics
    let logger: Logger
    let isReady: @Sendable () -> Bool
    /// The `callpush-origin` header value of the ring events this process publishes (unique per
    /// process), so its view reader need not decode them again.
    let origin: [UInt8]

    /// The header naming the dispatch process that published a ring event.
    public static let originHeader = "callpush-origin"

    /// A fresh origin value for one process.
    public static func makeOrigin(instanceID: String) -> [UInt8] { Array("\(instanceID)/\(UUID().uuidString.lowercased())".utf8) }

    /// Handlers over a view and a publisher; `isReady` answers `/readyz`.
    public init(configuration: DispatchConfiguration, view: StatusView, publisher: any EventPublishing,
                metrics: DispatchMetrics, logger: Logger, origin: [UInt8]? = nil,
                isReady: @escaping @Sendable () -> Bool) throws(AckTokenError) {
        self.origin = origin ?? Self.makeOrigin(instanceID: configuration.instanceID)
        self.configuration = configuration
        self.view = view
        self.publisher = publisher
        self.idempotency = IdempotencyStore(window: configuration.idempotencyWindow, capacity: configuration.idempotencyCapacity)
        self.rateLimiter = RateLimiter()
        self.authenticator = APIKeyAuthenticator(keys: configuration.apiKeys)
        self.ackTokens = try AckTokenSigner(secret: configuration.ackSecret)
        self.metrics = metrics
        self.logger = logger
        self.isReady = isReady
    }

    // MARK: Backend endpoints

    /// `POST /v1/calls`.
    func ring(_ request: Request, key: APIKey) async throws(DispatchProblem) -> Response {
        let body = try await collect(request)
        let submission = try CallSubmission.decode(body)
        let callId = submission.callId ?? CallID.make()
        let events = try submission.events(callId: callId, limits: configuration.limits, apps: configuration.apps, now: Date())
        let rings = events.map(\.ring)
        let fingerprint = submission.fingerprint(
            keyName: key.name, ringTimeoutSeconds: submission.ringTimeoutSeconds ?? configuration.limits.defaultRingTimeoutSeconds)
        switch idempotency.begin(callId: callId, fingerprint: fingerprint) {
        case .conflict: throw DispatchProblem.conflict(callId)
        case .replay(let stored): return Self.json(.accepted, stored)
        case .proceed: break
        }
        let records = events.map { event in
            KafkaProducerRecord(topic: configuration.requestsTopic, key: Array(callId.utf8), value: Array(event.encoded),
                                headers: [KafkaHeader(key: Self.originHeader, value: origin)])
        }
        let partitions: [Int32]
        do {
            partitions = try await publisher.publish(records)
        } catch {
            idempotency.finish(callId: callId, fingerprint: fingerprint, response: nil)
            throw error
        }
        let deviceKeys = rings.map { DeviceKey.make(token: $0.device.token) }
        view.apply(rings: rings, deviceKeys: deviceKeys, partition: partitions.first, acceptedHere: true)
        let answer = APIModels.Accepted(rings: rings, deviceKeys: deviceKeys).encoded()
        idempotency.finish(callId: callId, fingerprint: fingerprint, response: answer)
        logger.debug("call accepted", metadata: [
            "call.id": "\(callId)", "call.devices": "\(rings.count)", "api.key": "\(key.name)",
            "kafka.partition": "\(partitions.first ?? -1)",
        ])
        return Self.json(.accepted, answer)
    }

    /// `DELETE /v1/calls/{callId}`.
    func cancel(_ request: Request, callId: String) async throws(DispatchProblem) -> Response {
        let body = try await collect(request)
        var reason: String?
        if !body.isEmpty {
            do {
                reason = try ContractCoding.decode(APIModels.CancelBody.self, from: body).reason
            } catch {
                throw DispatchProblem.contract(error)
            }
        }
        let cancel = CancelRequest(callId: callId, requestedAt: ContractCoding.truncatedToMilliseconds(Date()), reason: reason)
        let event: Data
        do {
            event = try CallRequest.cancel(cancel).encoded()
            _ = try CallRequest.decode(event)
        } catch let error as ContractError {
            throw DispatchProblem.contract(error)
        } catch {
            throw DispatchProblem.invalid("reason", "cannot be encoded")
        }
        let record = KafkaProducerRecord(topic: configuration.requestsTopic, key: Array(callId.utf8), value: Array(event))
        _ = try await publisher.publish([record])
        return Self.json(.accepted, APIModels.encode(APIModels.Cancelled(callId: callId, cancelledAt: ContractCoding.format(cancel.requestedAt))))
    }

    /// `GET /v1/calls/{callId}`.
    func status(callId: String) throws(DispatchProblem) -> Response {
        guard let call = view.call(callId) else { throw DispatchProblem.notFound(callId) }
        return Self.json(.ok, APIModels.encode(APIModels.CallState(call)))
    }

    // MARK: Device endpoint

    /// `POST /v1/calls/{callId}/ack`: authenticated by the ack token, not an API key.
    func ack(_ request: Request, callId: String) async throws(DispatchProblem) -> Response {
        let body = try await collect(request)
        let ack: CallAck
        do {
            ack = try CallAck.decode(body)
        } catch {
            throw DispatchProblem.contract(error)
        }
        guard ackTokens.verify(ack.ackToken, callId: callId, deviceKey: ack.deviceKey) else {
            logger.info("ack refused: wrong token", metadata: ["call.id": "\(callId)", "device.key": "\(ack.deviceKey.prefix(8))"])
            throw DispatchProblem.badAckToken
        }
        let call = view.call(callId)
        let delivery = call?.deliveries.first { $0.deviceKey == ack.deviceKey }
        let status = CallStatus(
            callId: callId, deviceId: delivery?.deviceId, deviceKey: ack.deviceKey, app: call?.app,
            state: ack.outcome == .reported ? .reported : .suppressed, attempt: delivery?.attempt ?? 0,
            replay: delivery?.replay ?? 0, at: ContractCoding.truncatedToMilliseconds(Date()), apns: nil,
            error: ack.error, worker: configuration.instanceID)
        // Same partition number as the call's requests (known from the view); else the key decides.
        let record = KafkaProducerRecord(topic: configuration.statusTopic, partition: call?.partition, key: Array(callId.utf8),
                                         value: Array((try? status.encoded()) ?? Data()))
        let partitions = try await publisher.publish([record])
        view.apply(status: status, partition: partitions.first)
        return Self.json(.accepted, APIModels.encode(APIModels.AckAccepted(callId: callId, deviceKey: ack.deviceKey, state: status.state.rawValue)))
    }

    // MARK: Helpers

    /// Authenticates the bearer key and takes a rate-limit token.
    func authorize(_ request: Request) throws(DispatchProblem) -> APIKey {
        guard let header = request.headers[.authorization] else { throw DispatchProblem.missingKey }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw DispatchProblem.missingKey }
        var presented = parts[1].drop(while: { $0 == " " || $0 == "\t" })
        while let last = presented.last, last == " " || last == "\t" { presented = presented.dropLast() }
        guard let key = authenticator.authenticate(String(presented)) else {
            throw DispatchProblem.badKey
        }
        if let wait = rateLimiter.acquire(key) { throw DispatchProblem.rateLimited(retryAfter: wait) }
        return key
    }

    /// The body, refused with 413 beyond the limit (by Content-Length first, then while reading).
    func collect(_ request: Request) async throws(DispatchProblem) -> Data {
        let limit = configuration.limits.maxBodyBytes
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw DispatchProblem.bodyTooLarge(limit: limit)
        }
        do {
            let buffer = try await request.body.collect(upTo: limit)
            return Data(buffer.readableBytesView)
        } catch is NIOTooManyBytesError {
            throw DispatchProblem.bodyTooLarge(limit: limit)
        } catch {
            throw DispatchProblem(.malformedJSON, status: 400, title: "Unreadable body", detail: "the request body could not be read")
        }
    }

    static func json(_ status: HTTPResponse.Status, _ body: Data) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func problem(_ problem: DispatchProblem) -> Response {
        var headers: HTTPFields = [.contentType: "application/problem+json"]
        if let retryAfter = problem.retryAfter { headers[.retryAfter] = String(retryAfter) }
        if problem.status == 401 { headers[.wwwAuthenticate] = "Bearer realm=\"callpush\"" }
        return Response(status: .init(code: problem.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: problem.json)))
    }

    static func validCallId(_ text: String?) throws(DispatchProblem) -> String {
        guard let text, let callId = CallID.normalize(text) else { throw DispatchProblem.invalid("callId", "not a UUID") }
        return callId
    }
}
