import Foundation
import Hummingbird
import Locking
import Logging
import NIOCore

/// What answers the FCM listener's requests: `POST /token` (the OAuth token endpoint) and
/// `POST /v1/projects/{project}/messages:send`. Shared state lives in ``FCMSimulatorState`` behind a lock.
final class FCMSimulatorCore: Sendable {
    let configuration: FCMSimulatorConfiguration
    let accounts: [FCMSimulatorServiceAccount]
    let state: Locked<FCMSimulatorState>
    let logger: Logger
    /// The token URIs accepted as `aud` (set once the port is known).
    let audiences = Locked<Set<String>>([])
    private let messageCounter = Locked<UInt64>(0)

    init(configuration: FCMSimulatorConfiguration, accounts: [FCMSimulatorServiceAccount], logger: Logger) {
        self.configuration = configuration
        self.accounts = accounts
        self.logger = logger
        self.state = Locked(FCMSimulatorState(
            faults: configuration.faults, maxRecorded: configuration.maxRecordedMessages, maxTokens: configuration.maxAccessTokens))
    }

    /// Hummingbird's side (HTTP/1.1; HTTP/2 is ``FCMHTTP2Handler``'s): collect the body (bounded), answer, wait the
    /// injected latency.
    func respond(_ request: Request) async -> Response {
        var body: [UInt8]? = []
        if request.method == .post {
            body = (try? await request.body.collect(upTo: configuration.maxBodyBytes)).map { Array($0.readableBytesView) }
        }
        let answer = answer(FCMSimulatorRequest(
            method: request.method.rawValue, path: request.uri.path, authority: request.head.authority,
            authorization: request.headers[.authorization], body: body, httpVersion: "HTTP/1.1"))
        if let delay = answer.delay { try? await Task.sleep(for: delay) }
        var headers: HTTPFields = [.contentType: "application/json; charset=UTF-8"]
        if let seconds = answer.retryAfterSeconds { headers[.retryAfter] = String(seconds) }
        return Response(
            status: HTTPResponse.Status(code: answer.status), headers: headers, body: .init(byteBuffer: ByteBuffer(string: answer.body)))
    }

    /// Answers one request; the same for HTTP/1.1 (``respond(_:context:)``) and HTTP/2 (``FCMHTTP2Handler``).
    func answer(_ request: FCMSimulatorRequest) -> FCMSimulatorAnswer {
        state.withLock { $0.stats.requestsByVersion[request.httpVersion, default: 0] += 1 }
        if request.path == "/token" {
            return token(request)
        }
        if request.path.hasPrefix("/v1/projects/"), request.path.hasSuffix("/messages:send") {
            let project = String(request.path.dropFirst("/v1/projects/".count).dropLast("/messages:send".count))
            let now = configuration.clock.now()
            let latency = state.withLock { $0.faults.latency }
            var answer = send(request, project: project, now: now)
            answer.delay = latency?.sample()
            return answer
        }
        return error(FCMErrorAnswer(status: 404, message: "Requested entity was not found."))
    }

    // MARK: Token endpoint

    private func token(_ request: FCMSimulatorRequest) -> FCMSimulatorAnswer {
        let now = configuration.clock.now()
        let (fault, lifetime) = state.withLock { state in
            state.stats.tokenRequests += 1
            return (state.tokenEndpointFailure(), state.faults.accessTokenLifetimeSeconds)
        }
        func refuse(_ refusal: FCMGrantVerifier.Refusal) -> FCMSimulatorAnswer {
            state.withLock { $0.stats.tokenRequestsRefused[refusal.error, default: 0] += 1 }
            return FCMSimulatorAnswer(status: refusal.status, body: refusal.body)
        }
        guard request.method == "POST" else {
            return refuse(.init(status: 405, error: "invalid_request", description: "The token endpoint takes POST."))
        }
        if let fault {
            return refuse(.init(status: fault.status, error: fault.oauthError, description: "Simulated token endpoint failure."))
        }
        guard let body = request.body else {
            return refuse(.init(status: 400, error: "invalid_request", description: "Request body too large."))
        }
        let fields = FCMGrantVerifier.formFields(body)
        guard fields["grant_type"] == FCMGrantVerifier.jwtBearer else {
            return refuse(.init(status: 400, error: "unsupported_grant_type", description: "Invalid grant_type: \(fields["grant_type"]?.prefix(80) ?? "")"))
        }
        guard let assertion = fields["assertion"], !assertion.isEmpty else {
            return refuse(.init(status: 400, error: "invalid_request", description: "Missing required parameter: assertion"))
        }
        var audiences = self.audiences.withLock { $0 }
        if let authority = request.authority { audiences.insert("https://\(authority)/token") }
        switch FCMGrantVerifier.verify(assertion: assertion, accounts: accounts, audiences: audiences, now: now) {
        case .failure(let refusal):
            logger.debug("FCM simulator refused a token request", metadata: ["fcm.error": "\(refusal.error)"])
            return refuse(refusal)
        case .success(let account):
            let (token, seconds) = issueAccessToken(for: account, lifetimeSeconds: lifetime, now: now)
            return FCMSimulatorAnswer(
                status: 200, body: #"{"access_token":""# + token + #"","expires_in":"# + String(seconds) + #","token_type":"Bearer"}"#)
        }
    }

    /// Issues an access token for `account` (the token endpoint's answer, or the admin API's shortcut).
    func issueAccessToken(for account: FCMSimulatorServiceAccount, lifetimeSeconds: Int?, now: Date) -> (token: String, seconds: Int) {
        let seconds = lifetimeSeconds ?? Int(configuration.accessTokenLifetime.components.seconds)
        let token = "ya29.sim-" + Self.randomText(bytes: 36)
        state.withLock {
            $0.issue(token, account: account.clientEmail, project: account.projectID,
                     expiresAt: now.addingTimeInterval(TimeInterval(seconds)), now: now)
        }
        return (token, seconds)
    }

    // MARK: messages:send

    private func send(_ request: FCMSimulatorRequest, project: String, now: Date) -> FCMSimulatorAnswer {
        guard request.method == "POST" else {
            return reject(FCMErrorAnswer(status: 404, message: "Method not found."))
        }
        let credential = request.authorization.flatMap { value -> String? in
            let parts = value.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
            return String(parts[1])
        }
        guard let credential else {
            return reject(FCMErrorAnswer(
                status: 401,
                message: "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential."))
        }
        guard let issued = state.withLock({ $0.lookUp(credential) }), issued.expiresAt > now else {
            return reject(FCMErrorAnswer(
                status: 401,
                message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."))
        }
        guard issued.project == project else {
            return reject(FCMErrorAnswer(
                status: 403,
                message: "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project.prefix(100))' (or it may not exist)."))
        }
        guard let body = request.body else {
            return reject(.invalidArgument("", "Request payload size exceeds the limit: \(configuration.maxBodyBytes) bytes."))
        }
        let accepted: FCMMessageValidator.Accepted
        switch FCMMessageValidator.validate(body) {
        case .success(let value): accepted = value
        case .failure(let error): return reject(error)
        }
        if let injected = state.withLock({ $0.injectedError(token: accepted.token, now: now) }) {
            return reject(.simulated(injected))
        }
        if accepted.validateOnly {
            state.withLock { $0.stats.accepted += 1 }
            return FCMSimulatorAnswer(status: 200, body: #"{"name":"projects/"# + project + #"/messages/fake_message_id"}"#)
        }
        let name = "projects/\(project)/messages/\(nextMessageID(now: now))"
        let record = RecordedFCMMessage(
            name: name, project: project, token: accepted.token, data: accepted.data, android: accepted.android,
            hasNotification: accepted.hasNotification, account: issued.account, httpVersion: request.httpVersion, receivedAt: now)
        state.withLock { $0.record(record) }
        return FCMSimulatorAnswer(status: 200, body: #"{"name":""# + name + #""}"#)
    }

    /// `0:<microseconds>%<16 hex digits>`, the shape of FCM's message ids.
    private func nextMessageID(now: Date) -> String {
        let counter = messageCounter.withLock { value -> UInt64 in
            value &+= 1
            return value
        }
        let micros = UInt64(max(0, now.timeIntervalSince1970 * 1_000_000))
        return "0:\(micros)%" + String(counter &* 0x9E37_79B9_7F4A_7C15, radix: 16).leftPadded(to: 16)
    }

    private func reject(_ answer: FCMErrorAnswer) -> FCMSimulatorAnswer {
        state.withLock { $0.stats.rejected[answer.statsCode, default: 0] += 1 }
        return error(answer)
    }

    private func error(_ answer: FCMErrorAnswer) -> FCMSimulatorAnswer {
        FCMSimulatorAnswer(status: answer.status, body: answer.body, retryAfterSeconds: answer.retryAfterSeconds)
    }

    static func randomText(bytes count: Int) -> String {
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}

/// One request, as both transports hand it to ``FCMSimulatorCore/answer(_:)``.
struct FCMSimulatorRequest {
    var method: String
    var path: String
    var authority: String?
    var authorization: String?
    /// `nil` when it was larger than ``FCMSimulatorConfiguration/maxBodyBytes`` (not kept).
    var body: [UInt8]?
    /// `HTTP/2` or `HTTP/1.1`.
    var httpVersion: String
}

/// The answer: status, JSON body, `Retry-After`, and how long to wait before sending it (the latency fault).
struct FCMSimulatorAnswer {
    var status: Int
    var body: String
    var retryAfterSeconds: Int?
    var delay: Duration?
}
