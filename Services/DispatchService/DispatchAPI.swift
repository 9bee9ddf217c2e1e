import CallContract
import CallTracing
import CallpushCore
import Foundation
import Hummingbird
import Kafka
import Logging
import NIOCore
import Locking

/// The request handlers of the dispatch API (the routes are in `DispatchAPI+Routes.swift`).
/// Every handler answers JSON or `application/problem+json`; nothing is published for a
/// rejected request.
///
/// Calls belong to the tenant of the key that rang them: a key reads, follows and cancels only
/// its tenant's calls (anything else is an unknown call, 404), and idempotency is per tenant.
public final class DispatchAPI: Sendable {
    let configuration: DispatchConfiguration
    let view: StatusView
    let publisher: any EventPublishing
    let idempotency: IdempotencyStore
    /// Acks answered, once per (call, device, replay, outcome).
    let acks: IdempotencyStore
    let rateLimiter: RateLimiter
    let ackLimiterPerAddress: KeyedRateLimiter
    let ackLimiterPerCall: KeyedRateLimiter
    /// Rings per device (app + device key), against harassment through any key.
    let ringLimiterPerDevice: KeyedRateLimiter
    let streams: StreamSlots
    let authenticator: APIKeyAuthenticator
    let ackTokens: AckTokenSigner
    let metrics: DispatchMetrics
    let logger: Logger
    /// Unauthenticated clients must not decide how much gets logged.
    let logThrottle = LogThrottle(interval: .seconds(10))
    let isReady: @Sendable () -> Bool
    let isViewReady: @Sendable () -> Bool
    /// The `callpush-origin` header value of the ring events this process publishes (unique per
    /// process), so its view reader need not decode them again.
    let origin: [UInt8]
    /// Traces `POST /v1/calls` and `DELETE /v1/calls/{callId}` (off by default).
    let tracing: CallTracing

    /// The header naming the dispatch process that published a ring event.
    public static let originHeader = "callpush-origin"

    /// A fresh origin value for one process.
    public static func makeOrigin(instanceID: String) -> [UInt8] { Array("\(instanceID)/\(UUID.randomVersion4().lowercasedText)".utf8) }

    /// Handlers over a view and a publisher; `isReady` answers `/readyz`, `isViewReady` says
    /// whether the view has caught up (until then status reads answer 503, not 404).
    /// `limiterClock` is the seconds the per-address, per-call and per-device limits refill by.
    public init(configuration: DispatchConfiguration, view: StatusView, publisher: any EventPublishing,
                metrics: DispatchMetrics, logger: Logger, origin: [UInt8]? = nil, tracing: CallTracing = .off,
                limiterClock: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds,
                isReady: @escaping @Sendable () -> Bool, isViewReady: @escaping @Sendable () -> Bool = { true }) throws(AckTokenError) {
        self.origin = origin ?? Self.makeOrigin(instanceID: configuration.instanceID)
        self.tracing = tracing
        self.configuration = configuration
        self.view = view
        self.publisher = publisher
        self.idempotency = IdempotencyStore(window: configuration.idempotencyWindow, budgetBytes: configuration.idempotencyBytes)
        // An ack is answerable until its token expires: the longest ring plus the grace.
        self.acks = IdempotencyStore(window: .seconds(configuration.limits.ringTimeoutSeconds.upperBound) + configuration.ackGrace,
                                     budgetBytes: configuration.ackBytes)
        self.rateLimiter = RateLimiter()
        self.ackLimiterPerAddress = KeyedRateLimiter(ratePerSecond: configuration.ackRatePerAddress, burst: 2 * configuration.ackRatePerAddress,
                                                     now: limiterClock)
        self.ackLimiterPerCall = KeyedRateLimiter(ratePerSecond: configuration.ackRatePerCall, burst: 2 * configuration.ackRatePerCall,
                                                  now: limiterClock)
        self.ringLimiterPerDevice = KeyedRateLimiter(ratePerSecond: configuration.ringsPerDevicePerMinute / 60,
                                                     burst: configuration.ringsPerDevicePerMinute, now: limiterClock)
        self.streams = StreamSlots(perKey: configuration.eventStreamsPerKey, total: configuration.eventStreams)
        self.authenticator = APIKeyAuthenticator(keys: configuration.apiKeys)
        self.ackTokens = try AckTokenSigner(secret: configuration.ackSecret)
        self.metrics = metrics
        self.logger = logger
        self.isReady = isReady
        self.isViewReady = isViewReady
    }

    // MARK: Backend endpoints

    /// `POST /v1/calls` (`trace`: its span, when traced).
    func ring(_ request: Request, key: APIKey, channel: (any Channel)? = nil, trace: RequestTrace? = nil) async throws(DispatchProblem) -> Response {
        let body = try await collect(request, limit: configuration.limits.maxBodyBytes, channel: channel)
        let submission = try CallSubmission.decode(body)
        // Before the app's other checks: a restricted key learns nothing of other tenants' apps.
        guard key.mayRing(submission.app) else { throw DispatchProblem.appNotAllowed(submission.app) }
        let callId = submission.callId ?? CallID.make()
        let events = try submission.events(callId: callId, tenant: key.tenant, limits: configuration.limits, apps: configuration.apps, now: Date())
        trace?.describe(callId: callId, app: submission.app, tenant: key.tenant, devices: events.count)
        let rings = events.map(\.ring)
        let fingerprint = submission.fingerprint(ringTimeoutSeconds: submission.ringTimeoutSeconds ?? configuration.limits.defaultRingTimeoutSeconds)
        let idempotencyKey = key.tenant + "/" + callId
        switch await idempotency.begin(key: idempotencyKey, fingerprint: fingerprint) {
        case .conflict: throw DispatchProblem.conflict(callId)
        case .replay(let stored): return Self.json(.accepted, stored, location: "/v1/calls/\(callId)")
        case .proceed: break
        }
        let deviceKeys = rings.map { DeviceKey.make(token: $0.device.token) }
        for (index, deviceKey) in deviceKeys.enumerated() {
            if let wait = ringLimiterPerDevice.acquire(submission.app + "/" + deviceKey) {
                idempotency.finish(key: idempotencyKey, fingerprint: fingerprint, response: nil)
                metrics.deviceRateLimited()
                throw DispatchProblem.deviceRateLimited(field: "devices[\(index)].token", retryAfter: wait)
            }
        }
        let publishing = trace?.publishing()
        let headers = [KafkaHeader(key: Self.originHeader, value: origin)] + eventTraceHeaders(request, publishing: publishing)
        let records = events.map { event in
            KafkaProducerRecord(topic: configuration.requestsTopic, key: Array(callId.utf8), value: Array(event.encoded), headers: headers)
        }
        let partitions: [Int32]
        do {
            partitions = try await publisher.publish(records)
            publishing?.published(partitions: partitions)
        } catch {
            publishing?.failed(error)
            idempotency.finish(key: idempotencyKey, fingerprint: fingerprint, response: nil)
            throw error
        }
        view.apply(rings: rings, deviceKeys: deviceKeys, partition: partitions.first)
        let answer = APIModels.Accepted(rings: rings, deviceKeys: deviceKeys).encoded()
        idempotency.finish(key: idempotencyKey, fingerprint: fingerprint, response: answer)
        logger.debug("call accepted", metadata: [
            "call.id": "\(callId)", "call.devices": "\(rings.count)", "api.key": "\(key.name)", "api.tenant": "\(key.tenant)",
            "kafka.partition": "\(partitions.first ?? -1)",
        ])
        return Self.json(.accepted, answer, location: "/v1/calls/\(callId)")
    }

    /// `DELETE /v1/calls/{callId}`: only the tenant's own calls (the view must know it).
    func cancel(_ request: Request, key: APIKey, callId: String, channel: (any Channel)? = nil,
                trace: RequestTrace? = nil) async throws(DispatchProblem) -> Response {
        let call = try ownCall(key: key, callId: callId)
        trace?.describe(callId: callId, app: call.app, tenant: key.tenant, devices: nil)
        let body = try await collect(request, limit: configuration.limits.maxBodyBytes, channel: channel)
        var reason: String?
        if !body.isEmpty {
            do {
                reason = try ContractCoding.decode(APIModels.CancelBody.self, from: body).reason
            } catch {
                throw DispatchProblem.contract(error)
            }
        }
        let cancel = CancelRequest(callId: callId, requestedAt: ContractCoding.truncatedToMilliseconds(Date()), reason: reason, tenant: key.tenant)
        let event: Data
        do {
            event = try CallRequest.cancel(cancel).encoded()
            _ = try CallRequest.decode(event)
        } catch let error as ContractError {
            throw DispatchProblem.contract(error)
        } catch {
            throw DispatchProblem.invalid("reason", "cannot be encoded")
        }
        let publishing = trace?.publishing()
        let record = KafkaProducerRecord(topic: configuration.requestsTopic, key: Array(callId.utf8), value: Array(event),
                                         headers: eventTraceHeaders(request, publishing: publishing))
        do {
            // Not `publishing?.published(partitions: try await publisher.publish(…))`: optional
            // chaining would skip the publish itself whenever the request is not traced.
            let partitions = try await publisher.publish([record])
            publishing?.published(partitions: partitions)
        } catch {
            publishing?.failed(error)
            throw error
        }
        return Self.json(.accepted, APIModels.encode(APIModels.Cancelled(callId: callId, cancelledAt: ContractCoding.format(cancel.requestedAt))))
    }

    /// `GET /v1/calls/{callId}`.
    func status(key: APIKey, callId: String) throws(DispatchProblem) -> Response {
        Self.json(.ok, APIModels.encode(APIModels.CallState(try ownCall(key: key, callId: callId))))
    }

    /// The tenant's call, or 404 exactly as for an unknown call (503 while the view is not ready).
    func ownCall(key: APIKey, callId: String) throws(DispatchProblem) -> CallView {
        guard isViewReady() else { throw DispatchProblem.viewNotReady(retryAfter: configuration.retryAfterSeconds) }
        guard let call = view.call(CallKey(tenant: key.tenant, callId: callId)) else { throw DispatchProblem.notFound(callId) }
        return call
    }

    // MARK: Helpers

    /// Authenticates the bearer key and takes a rate-limit token.
    func authorize(_ request: Request) throws(DispatchProblem) -> APIKey {
        guard let header = Self.authorizationHeader(request.headers) else { throw DispatchProblem.missingKey }
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

    /// The `Authorization` value: a lone field's value as it is (`HTTPFields`' subscript joins
    /// every value into a new string, a copy per request); several fields joined as that
    /// subscript joins them (such a value is never a valid key).
    static func authorizationHeader(_ fields: HTTPFields) -> String? {
        var value: String?
        for field in fields where field.name == .authorization {
            guard value == nil else { return fields[.authorization] }
            value = field.value
        }
        return value
    }

    /// The body, refused with 413 beyond `limit` (by Content-Length first, then while reading)
    /// and with 408 when it does not arrive within the body timeout.
    ///
    /// The deadline shuts the connection's input (`channel`): the read ends at once, in this task
    /// (the body's iterator must be finished before the server reads the connection again), and
    /// the 408 still goes out before the connection closes. No task per request: that cost the
    /// ring path a measurable share of its throughput.
    func collect(_ request: Request, limit: Int, channel: (any Channel)?) async throws(DispatchProblem) -> Data {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw DispatchProblem.bodyTooLarge(limit: limit)
        }
        let timedOut = Locked(false)
        let deadline = channel.map { channel in
            DeadlineSweeper.shared.add(after: configuration.bodyTimeout) {
                timedOut.withLock { $0 = true }
                channel.close(mode: .input, promise: nil)
            }
        }
        let outcome: Result<ByteBuffer, any Error>
        do {
            outcome = .success(try await request.body.collect(upTo: limit))
        } catch {
            outcome = .failure(error)
        }
        if let deadline { DeadlineSweeper.shared.remove(deadline) }
        if timedOut.withLock({ $0 }) { throw DispatchProblem.bodyTimeout(configuration.bodyTimeout) }
        switch outcome {
        case .success(let buffer): return Data(buffer.readableBytesView)
        case .failure(let error) where error is NIOTooManyBytesError: throw DispatchProblem.bodyTooLarge(limit: limit)
        case .failure: throw DispatchProblem.unreadableBody
        }
    }

    static func json(_ status: HTTPResponse.Status, _ body: Data, location: String? = nil) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let location { headers[.location] = location }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func problem(_ problem: DispatchProblem, closeConnection: Bool = false) -> Response {
        var headers: HTTPFields = [.contentType: "application/problem+json"]
        if let retryAfter = problem.retryAfter { headers[.retryAfter] = String(retryAfter) }
        if problem.status == 401 {
            headers[.wwwAuthenticate] = problem == .badKey ? "Bearer realm=\"callpush\", error=\"invalid_token\"" : "Bearer realm=\"callpush\""
        }
        if let allow = problem.allow { headers[.allow] = allow }
        if closeConnection { headers[.connection] = "close" }
        return Response(status: .init(code: problem.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: problem.json)))
    }

    static func validCallId(_ text: String?) throws(DispatchProblem) -> String {
        guard let text, let callId = CallID.normalize(text) else { throw DispatchProblem.invalid("callId", "not a UUID") }
        return callId
    }
}
