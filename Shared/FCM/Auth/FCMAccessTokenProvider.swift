import AsyncHTTPClient
import Foundation
import Locking
import Logging
import NIOCore

/// The access tokens of one service account, shared by every app and connection using it (see
/// ``FCMTokenStateMachine`` for the rules). The one token request runs in a task of its own, bounded by
/// the token request timeout, so a sender that gives up does not cancel it for the others waiting.
final class FCMAccessTokenProvider: Sendable {
    typealias Waiter = CheckedContinuation<Result<FCMAccessToken, FCMError>, Never>

    private struct State {
        var machine: FCMTokenStateMachine<Waiter>
        var nextWaiterID = 0
        var tokenRequests = 0
        var fetchTask: Task<Void, Never>?
    }

    let account: FCMServiceAccount
    private let exchange: FCMTokenExchange
    private let requestTimeout: Duration
    private let group: any EventLoopGroup
    private let logger: Logger
    private let wallClock: @Sendable () -> Date
    private let state: Locked<State>

    init(
        account: FCMServiceAccount, exchange: FCMTokenExchange, policy: FCMAccessTokenPolicy, requestTimeout: Duration,
        group: any EventLoopGroup, logger: Logger, wallClock: @escaping @Sendable () -> Date
    ) {
        self.account = account
        self.exchange = exchange
        self.requestTimeout = requestTimeout
        self.group = group
        self.logger = logger
        self.wallClock = wallClock
        self.state = Locked(State(machine: FCMTokenStateMachine<Waiter>(policy: policy)))
    }

    /// Token requests sent to the token endpoint so far (tests, metrics).
    var tokenRequests: Int { state.withLock { $0.tokenRequests } }

    /// A usable access token, waiting at most until `deadline` for one to arrive.
    func token(deadline: NIODeadline) async -> Result<FCMAccessToken, FCMError> {
        // The common case, a current token not yet due for renewal, without a continuation.
        if let token = state.withLock({ $0.machine.usableToken(now: .now) }) { return .success(token) }
        let id = state.withLock { state -> Int in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                let action = state.withLock { $0.machine.request(id: id, waiter: continuation, now: .now) }
                switch action {
                case .resume(let result):
                    continuation.resume(returning: result)
                case .resumeAndFetch(let token):
                    startFetch()
                    continuation.resume(returning: .success(token))
                case .wait:
                    scheduleTimeout(id: id, deadline: deadline)
                case .waitAndFetch:
                    scheduleTimeout(id: id, deadline: deadline)
                    startFetch()
                }
            }
        } onCancel: {
            state.withLock { $0.machine.removeWaiter(id) }?
                .resume(returning: .failure(FCMError(.cancelled, "cancelled while waiting for an access token")))
        }
    }

    /// FCM answered 401 to a request made with `generation`; returns whether to retry with a renewed token.
    func reportRejected(generation: Int) -> Bool {
        let retry = state.withLock { $0.machine.reportRejected(generation: generation, now: .now) }
        if retry {
            logger.info("FCM refused the access token, renewing it", metadata: ["fcm.account": "\(account.clientEmail)"])
        }
        return retry
    }

    /// Fails every waiter and cancels the token request in flight.
    func shutdown() {
        let (waiters, task) = state.withLock { state in
            (state.machine.shutdown(), state.fetchTask)
        }
        task?.cancel()
        for waiter in waiters {
            waiter.resume(returning: .failure(FCMError(.shuttingDown, "the FCM client is shutting down")))
        }
    }

    private func scheduleTimeout(id: Int, deadline: NIODeadline) {
        group.any().scheduleTask(deadline: deadline) { [self] in
            state.withLock { $0.machine.removeWaiter(id) }?
                .resume(returning: .failure(FCMError(.tokenUnavailable, "no access token before the request's deadline")))
        }
    }

    private func startFetch() {
        // A task of its own: every sender of this service account waits for it, so the one that happened to
        // start it must not cancel it by giving up. Bounded by `requestTimeout`.
        let task = Task { await self.fetch() }
        state.withLock { $0.fetchTask = task }
    }

    private func fetch() async {
        state.withLock { $0.tokenRequests += 1 }
        // The token's lifetime counts from before the request: the server cannot have issued it earlier, so
        // the time the exchange took comes off the margin to its expiry instead of being added past it.
        let requested = ContinuousClock.now
        let result: Result<FCMTokenGrant, FCMError>
        do {
            let assertion = try FCMAssertion.make(account: account, issuedAt: wallClock())
            result = await exchange.exchange(
                assertion: assertion, tokenURI: account.tokenURI,
                deadline: .now() + TimeAmount(requestTimeout))
        } catch {
            result = .failure(FCMError(.signingFailed, "cannot sign the JWT grant for \(account.clientEmail)"))
        }
        switch result {
        case .success(let grant):
            let (token, waiters) = state.withLock { state in
                state.fetchTask = nil
                return state.machine.fetchSucceeded(authorization: "Bearer " + grant.accessToken, lifetime: grant.lifetime, now: requested)
            }
            logger.info(
                "FCM access token obtained",
                metadata: ["fcm.account": "\(account.clientEmail)", "fcm.token_generation": "\(token.generation)",
                           "fcm.expires_in_s": "\(grant.lifetime.components.seconds)"])
            for waiter in waiters { waiter.resume(returning: .success(token)) }
        case .failure(let error):
            let waiters = state.withLock { state in
                state.fetchTask = nil
                return state.machine.fetchFailed(error, now: .now)
            }
            logger.warning(
                "FCM access token request failed",
                metadata: ["fcm.account": "\(account.clientEmail)", "fcm.error": "\(error.code)", "fcm.detail": "\(error.message)"])
            for waiter in waiters { waiter.resume(returning: .failure(error)) }
        }
    }
}
