import Foundation
import Locking
import NIOCore

/// One VoIP push to one device.
///
/// Header values are fixed by the client for VoIP: `apns-push-type: voip`, `apns-topic: <bundle id>.voip`,
/// `apns-priority: 10`.
public struct APNSVoIPPush: Sendable {
    /// APNs' VoIP payload limit in bytes.
    public static let maximumPayloadSize = 5120

    /// The key of the app (bundle id and credentials) in the client's configuration.
    public var app: APNSAppID
    /// Hex device token from PushKit.
    public var deviceToken: String
    /// The environment the token belongs to (chooses the endpoint).
    public var environment: APNSEnvironment
    /// JSON payload bytes (at most ``maximumPayloadSize``).
    public var payload: ByteBuffer
    /// When APNs should give up storing the push.
    public var expiration: APNSExpiration
    /// The `apns-id`, sent as a lowercase UUID and echoed back by APNs.
    public var apnsID: UUID
    /// Overrides the client's default request timeout for this push (always bounded).
    public var timeout: Duration?

    public init(
        app: APNSAppID,
        deviceToken: String,
        environment: APNSEnvironment,
        payload: ByteBuffer,
        expiration: APNSExpiration = .immediately,
        apnsID: UUID = .randomVersion4(),
        timeout: Duration? = nil
    ) {
        self.app = app
        self.deviceToken = deviceToken
        self.environment = environment
        self.payload = payload
        self.expiration = expiration
        self.apnsID = apnsID
        self.timeout = timeout
    }

    /// Convenience initializer taking the payload as bytes.
    public init(
        app: APNSAppID, deviceToken: String, environment: APNSEnvironment, payload: some Collection<UInt8>,
        expiration: APNSExpiration = .immediately, apnsID: UUID = .randomVersion4(), timeout: Duration? = nil
    ) {
        self.init(
            app: app, deviceToken: deviceToken, environment: environment, payload: ByteBuffer(bytes: payload),
            expiration: expiration, apnsID: apnsID, timeout: timeout)
    }

    /// Checks what can be checked before sending: hex device token, payload size.
    ///
    /// ``APNSClient/send(_:)`` runs this itself and reports a failure as an outcome; call it earlier
    /// to reject a request up front.
    public func validate() throws(APNSError) {
        guard Self.isValidDeviceToken(deviceToken) else {
            throw APNSError(.invalidDeviceToken, "device token must be non-empty even-length hex (\(deviceToken.count) chars given)")
        }
        guard payload.readableBytes > 0 else {
            throw APNSError(.payloadEmpty, "payload is empty")
        }
        guard payload.readableBytes <= Self.maximumPayloadSize else {
            throw APNSError(
                .payloadTooLarge,
                "payload is \(payload.readableBytes) bytes, VoIP limit is \(Self.maximumPayloadSize)")
        }
    }

    /// Hex, even length, 2...400 characters (tokens are 32 bytes today; Apple says they may grow).
    static func isValidDeviceToken(_ token: String) -> Bool {
        let utf8 = token.utf8
        guard utf8.count >= 2, utf8.count <= 400, utf8.count % 2 == 0 else { return false }
        return Hex.isDigits(token)
    }
}

/// The `apns-expiration` header.
public enum APNSExpiration: Sendable, Hashable {
    /// `0`: deliver now or never (Apple's advice for VoIP).
    case immediately
    /// Store and retry until this time (sent as UNIX seconds).
    case at(Date)

    /// The header value in UNIX seconds.
    var headerValue: String {
        switch self {
        case .immediately: "0"
        case .at(let date): String(max(0, Int64(date.timeIntervalSince1970.rounded(.down))))
        }
    }
}

/// The short, loggable form of a device token: its first 8 characters.
func tokenPrefix(_ token: String) -> String {
    String(token.prefix(8)) + "…"
}
