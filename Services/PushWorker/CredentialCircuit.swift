import CallContract
import Foundation
import Locking

/// What a credential circuit is kept for: one credential of an app on one platform — its APNs
/// credential in one APNs environment, or its FCM service account.
public struct CredentialScope: Sendable, Hashable, CustomStringConvertible {
    public var app: String
    public var platform: DevicePlatform
    /// The APNs environment (iOS); nil for FCM, where an app has one service account.
    public var environment: APNSEnvironment?

    /// An app's APNs credential in `environment`.
    public init(app: String, environment: APNSEnvironment) {
        self.app = app
        self.platform = .ios
        self.environment = environment
    }

    /// An app's FCM service account.
    public static func fcm(app: String) -> CredentialScope {
        var scope = CredentialScope(app: app, environment: .production)
        scope.platform = .android
        scope.environment = nil
        return scope
    }

    /// The credential a ring of `app` to `device` is pushed with.
    public init(app: String, device: Device) {
        switch device.platform {
        case .ios: self.init(app: app, environment: device.environment ?? .production)
        case .android: self = .fcm(app: app)
        }
    }

    /// The push service that refused the credential, for messages.
    public var service: String { platform == .ios ? "APNs" : "FCM" }

    /// `app/production`, `app/sandbox` or `app/fcm`.
    public var description: String { "\(app)/\(environment?.rawValue ?? "fcm")" }
}

/// Stops pushing for an app whose credentials APNs refused, so a bad key or certificate does
/// not burn through a backlog of calls against APNs (reference/apns.md: "credentials are wrong
/// — alert; do not burn through a backlog").
///
/// A circuit per (app, platform, credential): the app's APNs credential in one environment, or
/// its FCM service account (FCM refuses it with `SENDER_ID_MISMATCH`, `THIRD_PARTY_AUTH_ERROR`, a
/// 401 after a renewed access token, or a token endpoint refusing the grant). Apple refuses a
/// credential per environment (`BadEnvironmentKeyInToken`, `BadCertificateEnvironment` for a key or
/// certificate valid in the other one, and the client keeps a connection pool per environment), so
/// one sandbox device refused that way suspends the app's sandbox pushes and nothing else.
/// Closed: pushes go out. After a `credentialsInvalid` answer it opens for a
/// cool-down (10 s, doubling to 5 min on each failed probe); deliveries for the app then end
/// `failed` with code `app-suspended` and go to the DLQ without contacting APNs (replay them once
/// the credentials are fixed). When the cool-down is over one delivery is let through as a probe:
/// any answer other than `credentialsInvalid` closes the circuit.
public final class CredentialCircuit: Sendable {
    /// What a delivery for an app may do now.
    public enum Admission: Sendable, Equatable {
        /// Push normally.
        case allowed
        /// Push: this delivery probes whether the credentials work again.
        case probe
        /// Do not push: the app is suspended until then, after APNs answered `reason`.
        case suspended(until: Date, reason: String)
    }

    struct Suspension {
        var until: Date
        var coolDown: Duration
        var reason: String
        /// When the probe in flight started (nil: none).
        var probeStarted: Date?
    }

    private let state = Locked<[CredentialScope: Suspension]>([:])
    let initialCoolDown: Duration
    let maximumCoolDown: Duration
    /// A probe that has not reported after this long (its task was cancelled) no longer blocks the next one.
    let probeBound: Duration

    public init(initialCoolDown: Duration = .seconds(10), maximumCoolDown: Duration = .seconds(300),
                probeBound: Duration = .seconds(30)) {
        self.initialCoolDown = initialCoolDown
        self.maximumCoolDown = max(initialCoolDown, maximumCoolDown)
        self.probeBound = probeBound
    }

    /// Whether a delivery in `scope` may push now.
    public func admit(_ scope: CredentialScope, now: Date) -> Admission {
        state.withLock { apps in
            guard var suspension = apps[scope] else { return .allowed }
            if now < suspension.until { return .suspended(until: suspension.until, reason: suspension.reason) }
            if let started = suspension.probeStarted, now.timeIntervalSince(started) < probeBound.inSeconds {
                return .suspended(until: started.addingTimeInterval(probeBound.inSeconds), reason: suspension.reason)
            }
            suspension.probeStarted = now
            apps[scope] = suspension
            return .probe
        }
    }

    /// What an APNs answer says about an app's credentials.
    public enum Evidence: Sendable, Equatable {
        /// APNs refused the credentials (`credentialsInvalid`), with Apple's reason.
        case refused(reason: String)
        /// APNs authenticated the request (sent, dead token, invalid request).
        case accepted
        /// No proof either way (timeout, lost connection, 5xx, 429).
        case inconclusive
    }

    /// Reports APNs' answer for a push in `scope`; `probe` says whether the delivery was admitted
    /// as the probe. A refusal opens the circuit (or re-opens it with a doubled cool-down); only
    /// a probe's acceptance closes it, so answers of pushes that were in flight before it opened
    /// do not. Returns the suspension's end when this answer opened the circuit.
    @discardableResult
    public func record(_ app: CredentialScope, _ evidence: Evidence, probe: Bool, now: Date) -> Date? {
        state.withLock { apps in
            switch evidence {
            case .refused(let reason):
                if let current = apps[app], !probe, current.probeStarted == nil, now < current.until {
                    return nil  // already open: a straggler of the same outage does not extend it
                }
                let coolDown = apps[app].map { min($0.coolDown * 2, maximumCoolDown) } ?? initialCoolDown
                let until = now.addingTimeInterval(coolDown.inSeconds)
                apps[app] = Suspension(until: until, coolDown: coolDown, reason: reason, probeStarted: nil)
                return until
            case .accepted:
                if probe { apps[app] = nil }
                return nil
            case .inconclusive:
                if probe, var suspension = apps[app] {
                    suspension.probeStarted = nil  // let the next delivery probe
                    apps[app] = suspension
                }
                return nil
            }
        }
    }

    /// Scopes whose pushes are held now (for the metrics gauge): suspended, or probing (the other
    /// deliveries wait for the probe's answer).
    public func suspended(now: Date) -> Set<CredentialScope> {
        state.withLock { apps in
            Set(apps.filter { now < $0.value.until || $0.value.probeStarted.map { now.timeIntervalSince($0) < probeBound.inSeconds } == true }.keys)
        }
    }

    /// Apps with a suspended or probing environment.
    public func suspendedApps(now: Date) -> Set<String> { Set(suspended(now: now).map(\.app)) }
}
