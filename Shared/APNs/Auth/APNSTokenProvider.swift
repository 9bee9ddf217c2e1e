import Foundation
import Locking

/// The provider token (JWT) of one `.p8` key, shared by every connection and app using that key.
///
/// Renewal rule (Apple: tokens older than 60 min are rejected with `ExpiredProviderToken`; renewing more
/// often than every 20 min gets `TooManyProviderTokenUpdates`):
/// 1. A token is signed lazily on first use and reused until it is ``renewAfter`` old (default 50 min);
///    the next request after that signs a new one. Requests never sign their own token.
/// 2. `ExpiredProviderToken` for a request signed with generation *g* (``reportExpired(generation:)``):
///    - if a newer generation exists already, nothing is renewed: retry with the newer token;
///    - otherwise the token is renewed at once ("APNs says expired ⇒ renew"), **unless** the current
///      token was itself minted by such a forced renewal less than ``minimumInterval`` (20 min) ago. That
///      stops loops (a server or clock that rejects every token) from turning into
///      `TooManyProviderTokenUpdates`: at most one forced renewal per generation and per 20 minutes.
/// 3. `TooManyProviderTokenUpdates` never renews.
public final class APNSTokenProvider: Sendable {
    /// A signed token and its generation (1, 2, …; increases with each renewal).
    public struct Token: Sendable, Hashable {
        /// The compact JWT.
        public let jwt: String
        /// `bearer <jwt>`, ready for the authorization header.
        public let authorization: String
        /// Increases by one for every token this provider signs.
        public let generation: Int
        /// The `iat` of the token.
        public let issuedAt: Date
    }

    private struct State {
        var current: Token?
        var currentWasForced = false
    }

    /// The signing key (its ids are used for pool keying and logs).
    public let key: APNSSigningKey
    /// Age at which the token is renewed on next use.
    public let renewAfter: Duration
    /// Minimum age before a forced renewal may replace a token minted by a forced renewal.
    public let minimumInterval: Duration
    private let now: @Sendable () -> Date
    private let state = Locked(State())

    /// - Parameters:
    ///   - renewAfter: clamped to 20...55 minutes.
    ///   - now: the wall clock (injectable for tests).
    public init(
        key: APNSSigningKey,
        renewAfter: Duration = .seconds(50 * 60),
        minimumInterval: Duration = .seconds(20 * 60),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.key = key
        self.renewAfter = min(max(renewAfter, .seconds(20 * 60)), .seconds(55 * 60))
        self.minimumInterval = minimumInterval
        self.now = now
    }

    /// The token to use now, signing a new one if none exists or it is ``renewAfter`` old.
    public func token() throws(APNSError) -> Token {
        let now = self.now()
        let result: Result<Token, APNSError> = state.withLock { state in
            if let current = state.current, Self.age(of: current, at: now) < renewAfter.inSeconds {
                return .success(current)
            }
            return Result { () throws(APNSError) -> Token in
                try Self.renew(&state, key: key, now: now, forced: false)
            }
        }
        return try result.get()
    }

    /// Reports `ExpiredProviderToken` for a request signed with `generation`.
    ///
    /// - Returns: `true` if a newer token than `generation` is now available (retrying makes sense),
    ///   `false` if the loop protection refused to renew.
    @discardableResult
    public func reportExpired(generation: Int) -> Bool {
        let now = self.now()
        return state.withLock { state in
            guard let current = state.current else { return true }
            if current.generation > generation { return true }
            if state.currentWasForced, Self.age(of: current, at: now) < minimumInterval.inSeconds {
                return false
            }
            return (try? Self.renew(&state, key: key, now: now, forced: true)) != nil
        }
    }

    /// The generation of the current token (0 before the first).
    public var currentGeneration: Int { state.withLock { $0.current?.generation ?? 0 } }

    private static func age(of token: Token, at now: Date) -> TimeInterval {
        // A clock that went backwards makes the token look new; it is then renewed on schedule.
        now.timeIntervalSince(token.issuedAt)
    }

    private static func renew(_ state: inout State, key: APNSSigningKey, now: Date, forced: Bool) throws(APNSError) -> Token {
        let jwt: String
        do {
            jwt = try APNSJWT.make(key: key, issuedAt: now)
        } catch {
            throw APNSError(.signingFailed, "could not sign the provider token for key \(key.keyID)")
        }
        let token = Token(
            jwt: jwt, authorization: "bearer " + jwt, generation: (state.current?.generation ?? 0) + 1, issuedAt: now)
        state.current = token
        state.currentWasForced = forced
        return token
    }
}
