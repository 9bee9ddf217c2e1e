import Foundation
import Hummingbird
import Locking
import Logging
import NIOCore

/// The request context of the FCM listener: knows whether the request came over HTTP/2 (a stream channel,
/// whose parent is the connection) or HTTP/1.1 (the connection itself).
struct FCMRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let httpVersion: String

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        httpVersion = source.channel.parent?.parent != nil ? "HTTP/2" : "HTTP/1.1"
    }
}

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

    func respond(_ request: Request, context: FCMRequestContext) async -> Response {
        state.withLock { $0.stats.requestsByVersion[context.httpVersion, default: 0] += 1 }
        let path = request.uri.path
        if path == "/token" {
            return await token(request)
        }
        if path.hasPrefix("/v1/projects/"), path.hasSuffix("/messages:send") {
            let project = String(path.dropFirst("/v1/projects/".count).dropLast("/messages:send".count))
            return await send(request, project: project, httpVersion: context.httpVersion)
        }
        return answer(FCMErrorAnswer(status: 404, message: "Requested entity was not found."))
    }

    // MARK: Token endpoint

    private func token(_ request: Request) async -> Response {
        let now = configuration.clock.now()
        let (fault, lifetime) = state.withLock { state in
            state.stats.tokenRequests += 1
            return (state.tokenEndpointFailure(), state.faults.accessTokenLifetimeSeconds)
        }
        func refuse(_ refusal: FCMGrantVerifier.Refusal) -> Response {
            state.withLock { $0.stats.tokenRequestsRefused[refusal.error, default: 0] += 1 }
            return json(refusal.status, refusal.body)
        }
        guard request.method == .post else {
            return refuse(.init(status: 405, error: "invalid_request", description: "The token endpoint takes POST."))
        }
        if let fault {
            return refuse(.init(status: fault.status, error: fault.oauthError, description: "Simulated token endpoint failure."))
        }
        guard let body = try? await request.body.collect(upTo: configuration.maxBodyBytes) else {
            return refuse(.init(status: 400, error: "invalid_request", description: "Request body too large."))
        }
        let fields = FCMGrantVerifier.formFields(Array(body.readableBytesView))
        guard fields["grant_type"] == FCMGrantVerifier.jwtBearer else {
            return refuse(.init(status: 400, error: "unsupported_grant_type", description: "Invalid grant_type: \(fields["grant_type"]?.prefix(80) ?? "")"))
        }
        guard let assertion = fields["assertion"], !assertion.isEmpty else {
            return refuse(.init(status: 400, error: "invalid_request", description: "Missing required parameter: assertion"))
        }
        var audiences = self.audiences.withLock { $0 }
        if let authority = request.head.authority { audiences.insert("https://\(authority)/token") }
        switch FCMGrantVerifier.verify(assertion: assertion, accounts: accounts, audiences: audiences, now: now) {
        case .failure(let refusal):
            logger.debug("FCM simulator refused a token request", metadata: ["fcm.error": "\(refusal.error)"])
            return refuse(refusal)
        case .success(let account):
            let (token, seconds) = issueAccessToken(for: account, lifetimeSeconds: lifetime, now: now)
            return json(200, #"{"access_token":""# + token + #"","expires_in":"# + String(seconds) + #","token_type":"Bearer"}"#)
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

    private func send(_ request: Request, project: String, httpVersion: String) async -> Response {
        let now = configuration.clock.now()
        let latency = state.withLock { $0.faults.latency }
        let result = await decide(request, project: project, httpVersion: httpVersion, now: now)
        if let latency { try? await Task.sleep(for: latency.sample()) }
        return result
    }

    private func decide(_ request: Request, project: String, httpVersion: String, now: Date) async -> Response {
        guard request.method == .post else {
            return reject(FCMErrorAnswer(status: 404, message: "Method not found."))
        }
        let credential = request.headers[.authorization].flatMap { value -> String? in
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
        guard let body = try? await request.body.collect(upTo: configuration.maxBodyBytes) else {
            return reject(.invalidArgument("", "Request payload size exceeds the limit: \(configuration.maxBodyBytes) bytes."))
        }
        let accepted: FCMMessageValidator.Accepted
        switch FCMMessageValidator.validate(Array(body.readableBytesView)) {
        case .success(let value): accepted = value
        case .failure(let error): return reject(error)
        }
        if let injected = state.withLock({ $0.injectedError(token: accepted.token, now: now) }) {
            return reject(.simulated(injected))
        }
        if accepted.validateOnly {
            state.withLock { $0.stats.accepted += 1 }
            return json(200, #"{"name":"projects/"# + project + #"/messages/fake_message_id"}"#)
        }
        let name = "projects/\(project)/messages/\(nextMessageID(now: now))"
        let record = RecordedFCMMessage(
            name: name, project: project, token: accepted.token, data: accepted.data, android: accepted.android,
            hasNotification: accepted.hasNotification, account: issued.account, httpVersion: httpVersion, receivedAt: now)
        state.withLock { $0.record(record) }
        return json(200, #"{"name":""# + name + #""}"#)
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

    private func reject(_ error: FCMErrorAnswer) -> Response {
        state.withLock { $0.stats.rejected[error.statsCode, default: 0] += 1 }
        return answer(error)
    }

    private func answer(_ error: FCMErrorAnswer) -> Response {
        var response = json(error.status, error.body)
        if let seconds = error.retryAfterSeconds {
            response.headers[.retryAfter] = String(seconds)
        }
        return response
    }

    private func json(_ status: Int, _ body: String) -> Response {
        Response(
            status: HTTPResponse.Status(code: status), headers: [.contentType: "application/json; charset=UTF-8"],
            body: .init(byteBuffer: ByteBuffer(string: body)))
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
