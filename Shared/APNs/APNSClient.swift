import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Locking
import PushClientSupport

/// The APNs VoIP push client: HTTP/2 over TLS, several apps with their own credentials, a connection
/// pool per (credential, environment), typed outcomes.
///
/// Use it directly (``send(_:)`` / ``shutdown()``) or run it in a `ServiceGroup`: on graceful shutdown it
/// stops taking pushes, lets in-flight ones finish (bounded by `shutdownDrainTimeout`), then closes.
public final class APNSClient: Service, Sendable {
    struct AppEntry: Sendable {
        let topic: String
        let tokenProvider: APNSTokenProvider?
        let pools: [APNSEnvironment: APNSConnectionPool]
    }

    /// The configuration in use.
    public let configuration: APNSClientConfiguration
    private let apps: [APNSAppID: AppEntry]
    private let pools: [APNSConnectionPool]
    let group: any EventLoopGroup  // internal: tests check which group a program gives it
    private let logger: Logger
    private let drain = Locked(InFlightDrain())

    /// Creates a client. No I/O happens until the first push (connections open lazily).
    ///
    /// - Parameters:
    ///   - apps: app name → bundle id and credentials. Apps with the same `.p8` key share its token and connections.
    ///   - eventLoopGroup: defaults to NIO's shared singleton group.
    ///   - now: wall clock for provider tokens (injectable for tests).
    /// - Throws: ``APNSCredentialError`` naming the bad setting or credential.
    public init(
        configuration: APNSClientConfiguration,
        apps: [APNSAppID: APNSApp],
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: APNSClient.defaultLoggerLabel),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws(APNSCredentialError) {
        try configuration.validate()
        guard !apps.isEmpty else { throw APNSCredentialError(.invalidConfiguration, "no APNs apps configured") }
        self.configuration = configuration
        self.group = eventLoopGroup
        self.logger = logger

        func makeContext(_ certificate: APNSClientCertificate?) throws(APNSCredentialError) -> NIOSSLContext {
            let tls = try configuration.makeTLSConfiguration(clientCertificate: certificate)
            do {
                return try NIOSSLContext(configuration: tls)
            } catch {
                throw APNSCredentialError(.invalidCertificate, "cannot build TLS context: \(error)")
            }
        }

        var tokenProviders: [String: APNSTokenProvider] = [:]
        var poolsByCredential: [String: [APNSEnvironment: APNSConnectionPool]] = [:]
        var tokenContext: NIOSSLContext?
        var entries: [APNSAppID: AppEntry] = [:]
        for (appID, app) in apps.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            guard APNSApp.isValidBundleID(app.bundleID) else {
                throw APNSCredentialError(.invalidConfiguration, "app \(appID): bundle id must be 1–155 of A–Z a–z 0–9 . -")
            }
            let credentialName: String
            let context: NIOSSLContext
            var provider: APNSTokenProvider?
            switch app.credentials {
            case .token(let key):
                credentialName = "token-\(key.teamID)-\(key.keyID)"
                if tokenContext == nil { tokenContext = try makeContext(nil) }
                context = tokenContext!
                provider = tokenProviders[credentialName] ?? APNSTokenProvider(key: key, renewAfter: configuration.tokenRenewAfter, now: now)
                tokenProviders[credentialName] = provider
            case .certificate(let certificate):
                credentialName = "cert-\(appID.rawValue)"
                context = try makeContext(certificate)
            }
            var pools = poolsByCredential[credentialName] ?? [:]
            for environment in APNSEnvironment.allCases where pools[environment] == nil {
                pools[environment] = APNSConnectionPool(
                    name: "\(credentialName)-\(environment.rawValue)",
                    endpoint: configuration.endpoint(for: environment), tlsContext: context,
                    group: eventLoopGroup, configuration: configuration, logger: logger)
            }
            poolsByCredential[credentialName] = pools
            entries[appID] = AppEntry(topic: app.voipTopic, tokenProvider: provider, pools: pools)
        }
        self.apps = entries
        self.pools = poolsByCredential.values.flatMap { $0.values }
    }

    /// Sends one VoIP push and returns its one outcome. Never throws, never waits past the push's deadline
    /// (its `timeout` or the configured `requestTimeout`), retries refused streams and an expired provider
    /// token transparently within that deadline.
    public func send(_ push: APNSVoIPPush) async -> APNSOutcome {
        guard beginPush() else { return Self.shuttingDown(push) }
        defer { endPush() }
        switch PushProgress.begin(push, on: self) {
        case .ended(let outcome): return outcome
        case .ready(let progress): return await attempts(progress)
        }
    }

    /// Sends several VoIP pushes, each as ``send(_:)`` would (its own deadline, retries and outcome),
    /// reporting each push's outcome through `answered` (its index in `pushes`, the outcome) as soon as
    /// it is known, so one slow answer holds back none of the others; returns once every push was
    /// answered, each exactly once. The run goes to one of the client's event loops once: there each
    /// push's first request is written and its answer taken through a callback, without a task per
    /// push. Only a push that must wait for a stream or be tried again continues as ``send(_:)`` does,
    /// in a task of its own.
    public func send(_ pushes: [APNSVoIPPush], answered: @escaping @Sendable (Int, APNSOutcome) -> Void) async {
        guard pushes.count > 1 else {
            if !pushes.isEmpty { answered(0, await send(pushes[0])) }
            return
        }
        @Sendable func writeAll() async {
            await withUnsafeContinuation { (done: UnsafeContinuation<Void, Never>) in
                let left = Locked(pushes.count)
                for (index, push) in pushes.enumerated() {
                    firstAttempt(push) { outcome in
                        answered(index, outcome)
                        if left.withLock({ $0 -= 1; return $0 == 0 }) { done.resume() }
                    }
                }
            }
        }
        // `any()` is the loop the caller runs on when that is one of the client's (the push-worker runs its
        // deliveries there): the run stays where it is, with no hop to an executor of its own and back.
        let loop = group.any()
        if loop.inEventLoop {
            await writeAll()
        } else {
            await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) { await writeAll() }
        }
    }

    /// One push on its way: what its attempts share (deadline, attempts made, what was renewed or retired
    /// once), and the rules that decide after each answer whether it ends or is tried again.
    ///
    /// A class, handed from step to step (the first request, its callback on the event loop, a task
    /// for further attempts) rather than copied with all it holds at each. One step at a time uses it,
    /// and each hands over to the next through NIO or a new task, which order their memory.
    private final class PushProgress: @unchecked Sendable {
        let push: APNSVoIPPush
        let app: AppEntry
        let pool: APNSConnectionPool
        let apnsID: String
        let start: ContinuousClock.Instant
        let deadline: NIODeadline
        var attempts = 0
        var renewedToken = false
        var retiredIdleConnection = false
        /// The provider token of the attempt under way.
        var token: APNSTokenProvider.Token?

        /// The push's progress before its first attempt, or its outcome when it cannot be sent (no
        /// credentials for its app, a request APNs would refuse).
        static func begin(_ push: APNSVoIPPush, on client: APNSClient) -> Began {
            let start = ContinuousClock.now
            let apnsID = push.apnsID.lowercasedText
            func failure(_ error: APNSError) -> Began {
                .ended(APNSOutcome(error: error, apnsID: apnsID, latency: ContinuousClock.now - start, attempts: 0))
            }
            guard let app = client.apps[push.app] else {
                return failure(APNSError(.unknownApp, "no credentials configured for app \(push.app)"))
            }
            do throws(APNSError) {
                try push.validate()
            } catch {
                return failure(error)
            }
            guard let pool = app.pools[push.environment] else {
                return failure(APNSError(.unknownApp, "no pool for \(push.environment)"))
            }
            let deadline = NIODeadline.now() + TimeAmount(push.timeout ?? client.configuration.requestTimeout)
            return .ready(PushProgress(push: push, app: app, pool: pool, apnsID: apnsID, start: start, deadline: deadline))
        }

        private init(push: APNSVoIPPush, app: AppEntry, pool: APNSConnectionPool, apnsID: String, start: ContinuousClock.Instant,
                     deadline: NIODeadline) {
            self.push = push
            self.app = app
            self.pool = pool
            self.apnsID = apnsID
            self.start = start
            self.deadline = deadline
        }

        enum Began {
            case ready(PushProgress)
            case ended(APNSOutcome)
        }

        func failure(_ error: APNSError) -> APNSOutcome {
            APNSOutcome(error: error, apnsID: apnsID, latency: ContinuousClock.now - start, attempts: attempts)
        }

        /// Takes the provider token for the next attempt; the outcome when there is none.
        func takeToken() -> APNSOutcome? {
            guard let provider = app.tokenProvider else { return nil }
            do throws(APNSError) {
                token = try provider.token()
                return nil
            } catch {
                return failure(error)
            }
        }

        /// The next attempt's header block (counted as an attempt).
        func request(on client: APNSClient) -> HPACKHeaders {
            attempts += 1
            return client.makeHeaders(push, apnsID: apnsID, topic: app.topic, authority: pool.endpoint.authority, token: token)
        }

        /// Renews an expired provider token once per push (and once per token generation across pushes).
        func renewToken(logger: Logger) -> Bool {
            guard !renewedToken, let provider = app.tokenProvider, let token, NIODeadline.now() < deadline,
                  provider.reportExpired(generation: token.generation)
            else { return false }
            renewedToken = true
            logger.info("provider token expired, retrying with a renewed token", metadata: ["apns.key": "\(provider.key.keyID)"])
            return true
        }

        /// After an attempt on `lease` ended with `result`: the push's outcome, or nil to try again.
        func outcome(of result: APNSStreamResult, on lease: APNSConnectionPool.Lease, logger: Logger) -> APNSOutcome? {
            pool.release(lease)
            switch result {
            case .response(let status, let responseID, let uniqueID, let body):
                let (reason, timestamp) = status == 200 ? (nil, nil) : APNSClient.parseErrorBody(body)
                if reason == .expiredProviderToken, renewToken(logger: logger) { return nil }
                if reason == .idleTimeout, !retiredIdleConnection {
                    // About the connection, not the push (which was not processed): replace it and try again.
                    retiredIdleConnection = true
                    pool.retire(lease)
                    if NIODeadline.now() < deadline { return nil }
                }
                let outcome = APNSOutcome(
                    status: status, reason: reason, apnsID: responseID ?? apnsID, uniqueID: uniqueID, timestamp: timestamp,
                    latency: ContinuousClock.now - start, attempts: attempts)
                if status != 200 {
                    logger.debug(
                        "APNs rejected a push",
                        metadata: ["apns.status": "\(status)", "apns.reason": "\(outcome.code)", "apns.token": "\(tokenPrefix(push.deviceToken))"])
                }
                return outcome
            case .failed(let failure):
                switch failure {
                case .refused(let reason):
                    // Above a GOAWAY's last stream id, never processed. A reason Apple's table does not retry
                    // (BadCertificateEnvironment: the certificate is for the other environment) ends the push.
                    switch reason.map(APNSReason.init(rawValue:)).flatMap(APNSDisposition.classify(reason:)) {
                    case .renewTokenAndRetry? where renewToken(logger: logger): return nil
                    case .retry?, nil: if NIODeadline.now() < deadline, attempts < APNSClient.maximumAttempts { return nil }
                    default: break
                    }
                case .notSent:
                    if NIODeadline.now() < deadline, attempts < APNSClient.maximumAttempts { return nil }
                default:
                    break
                }
                return APNSClient.outcome(failure, apnsID: apnsID, start: start, attempts: attempts)
            }
        }
    }

    /// A push's attempts until it has an outcome, each waiting for a stream if none is free.
    private func attempts(_ progress: PushProgress) async -> APNSOutcome {
        while true {
            if let outcome = progress.takeToken() { return outcome }
            let lease: APNSConnectionPool.Lease
            switch await progress.pool.lease(deadline: progress.deadline) {
            case .success(let value): lease = value
            case .failure(let error): return progress.failure(error)
            }
            let headers = progress.request(on: self)
            let result = await lease.connection.execute(headers: headers, body: progress.push.payload, deadline: progress.deadline)
            if let outcome = progress.outcome(of: result, on: lease, logger: logger) { return outcome }
        }
    }

    /// A push of a run: its first request is written at once when a stream is free, its answer taken by
    /// callback; otherwise (no free stream, or another attempt needed) it goes on in a task as
    /// ``send(_:)``'s attempts do. `then` gets its one outcome.
    private func firstAttempt(_ push: APNSVoIPPush, then: @escaping @Sendable (APNSOutcome) -> Void) {
        guard beginPush() else { return then(Self.shuttingDown(push)) }
        let progress: PushProgress
        switch PushProgress.begin(push, on: self) {
        case .ended(let outcome):
            endPush()
            return then(outcome)
        case .ready(let value): progress = value
        }
        if let outcome = progress.takeToken() {
            endPush()
            return then(outcome)
        }
        let lease: APNSConnectionPool.Lease
        switch progress.pool.leaseNow() {
        case .success(let value)?: lease = value
        case .failure(let error)?:
            endPush()
            return then(progress.failure(error))
        case nil:
            return inTask(progress, then: then)
        }
        let headers = progress.request(on: self)
        lease.connection.submit(headers: headers, body: push.payload, deadline: progress.deadline) { [self] result in
            if let outcome = progress.outcome(of: result, on: lease, logger: logger) {
                endPush()
                then(outcome)
            } else {
                inTask(progress, then: then)
            }
        }
    }

    /// The rest of a run's push, in a task of its own (between `beginPush` and `endPush`).
    private func inTask(_ progress: PushProgress, then: @escaping @Sendable (APNSOutcome) -> Void) {
        Task {
            let outcome = await attempts(progress)
            endPush()
            then(outcome)
        }
    }

    private static func shuttingDown(_ push: APNSVoIPPush) -> APNSOutcome {
        APNSOutcome(error: APNSError(.shuttingDown, "the APNs client is shutting down"), apnsID: push.apnsID.lowercasedText,
                    latency: .zero, attempts: 0)
    }

    /// Sends several VoIP pushes as ``send(_:answered:)`` does and returns one outcome per push, in
    /// order, once all are answered.
    public func send(_ pushes: [APNSVoIPPush]) async -> [APNSOutcome] {
        let outcomes = Locked([APNSOutcome?](repeating: nil, count: pushes.count))
        await send(pushes) { index, outcome in outcomes.withLock { $0[index] = outcome } }
        return zip(pushes, outcomes.withLock { $0 }).map { push, outcome in
            outcome ?? APNSOutcome(error: APNSError(.shuttingDown, "the push was not sent"),
                                   apnsID: push.apnsID.lowercasedText, latency: .zero, attempts: 0)
        }
    }

    /// Stops taking pushes, waits for in-flight ones (at most `shutdownDrainTimeout`), closes all connections.
    /// Idempotent.
    public func shutdown() async {
        let alreadyDraining = drain.withLock { !$0.stopAccepting() }
        if !alreadyDraining {
            logger.info("APNs client draining in-flight pushes")
        }
        await drain.waitForDrain(\.self, timeout: configuration.shutdownDrainTimeout, on: group.any())
        let first = drain.withLock { $0.markShutDown() }
        guard first else { return }
        for pool in pools { await pool.shutdown() }
        logger.info("APNs client stopped")
    }

    /// `Service`: runs until graceful shutdown (or cancellation), then ``shutdown()``.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Connections started by all pools since creation (tests: reconnect backoff).
    var connectAttempts: Int { pools.reduce(0) { $0 + $1.connectAttempts } }

    // MARK: - Internals

    private func beginPush() -> Bool {
        drain.withLock { $0.begin() }
    }

    private func endPush() {
        drain.withLock { $0.end() }?.resume()
    }

    /// The request's header block. Fields that repeat on every push are indexed by NIO's HPACK encoder (a byte or
    /// two after the first request), the provider token too: it is the same on every request of a connection for
    /// most of an hour, and ~200 Huffman-coded bytes per push otherwise. (HPACK indexes whole fields, so nothing
    /// sent alongside can probe it, and TLS runs end to end to APNs.) The per-push path, id and expiry are not
    /// indexed, so they do not evict the rest.
    fileprivate func makeHeaders(
        _ push: APNSVoIPPush, apnsID: String, topic: String, authority: String, token: APNSTokenProvider.Token?
    ) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(10)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: authority)
        headers.add(name: ":path", value: "/3/device/" + push.deviceToken, indexing: .nonIndexable)
        headers.add(name: "apns-push-type", value: "voip")
        headers.add(name: "apns-topic", value: topic)
        headers.add(name: "apns-priority", value: "10")
        let expiration = push.expiration.headerValue
        headers.add(name: "apns-expiration", value: expiration, indexing: expiration == "0" ? .indexable : .nonIndexable)
        headers.add(name: "apns-id", value: apnsID, indexing: .nonIndexable)
        if let token {
            headers.add(name: "authorization", value: token.authorization)
        }
        return headers
    }

    private struct ErrorBody: Decodable {
        var reason: String?
        var timestamp: Int64?
    }

    static func parseErrorBody(_ body: ByteBuffer?) -> (APNSReason?, Date?) {
        guard let body, body.readableBytes > 0,
            let decoded = try? JSONDecoder().decode(ErrorBody.self, from: Data(body.readableBytesView))
        else { return (nil, nil) }
        let timestamp = decoded.timestamp.map { Date(timeIntervalSince1970: TimeInterval($0) / 1000) }
        return (decoded.reason.map(APNSReason.init(rawValue:)), timestamp)
    }

    /// Requests made for one push at most: refused streams and connections that closed under it are retried
    /// within the deadline, but not forever.
    static let maximumAttempts = 16

    private static func outcome(_ failure: APNSStreamFailure, apnsID: String, start: ContinuousClock.Instant, attempts: Int) -> APNSOutcome {
        let error: APNSError
        switch failure {
        case .timeout: error = APNSError(.timeout, "no response before the deadline")
        case .connectionLost: error = APNSError(.connectionLost, "connection lost before the response; the push may have been delivered")
        case .refused(nil): error = APNSError(.refusedStream, "stream refused and no time left to retry")
        case .refused(let reason?):
            error = APNSError(
                .refusedStream, "APNs closed the connection (GOAWAY) before processing the push", reason: APNSReason(rawValue: reason))
        case .notSent, .expired:
            error = APNSError(.queueTimeout, "no HTTP/2 stream could take the push before its deadline; it was not sent")
        case .reset(let code): error = APNSError(.streamReset, "stream reset by server: \(code)")
        case .protocolError: error = APNSError(.protocolError, "invalid response from server")
        }
        return APNSOutcome(error: error, apnsID: apnsID, latency: ContinuousClock.now - start, attempts: attempts)
    }
}
