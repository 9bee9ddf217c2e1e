import Crypto
import Foundation

/// The per-delivery token the worker puts in the VoIP payload and dispatch checks on `ack`:
/// HMAC-SHA256 over the call id and device key with a secret shared by workers and dispatch,
/// base64url without padding. Only the device that received the push can present it.
public struct AckTokenSigner: Sendable {
    /// Raw secret bytes (swift-crypto's `SymmetricKey` is not `Sendable`; a key is made per use).
    private let secret: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: secret) }

    /// The secret must be at least 32 bytes (read it from a file or the environment, never a flag).
    public init(secret: [UInt8]) throws(AckTokenError) {
        guard secret.count >= 32 else { throw AckTokenError.secretTooShort(secret.count) }
        self.secret = secret
    }

    public func token(callId: String, deviceKey: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: message(callId, deviceKey), using: key)
        return Base64URL.encode(Array(mac))
    }

    /// Constant-time check of a presented token.
    public func verify(_ token: String, callId: String, deviceKey: String) -> Bool {
        guard token.utf8.count <= 64, let bytes = Base64URL.decode(token) else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(bytes, authenticating: message(callId, deviceKey), using: key)
    }

    private func message(_ callId: String, _ deviceKey: String) -> [UInt8] {
        Array("callpush-ack-v1\n\(callId.lowercased())\n\(deviceKey)".utf8)
    }
}

public enum AckTokenError: Error, Sendable, Hashable, CustomStringConvertible {
    case secretTooShort(Int)

    public var description: String {
        switch self {
        case .secretTooShort(let count): "ack secret is \(count) bytes; at least 32 are required"
        }
    }
}

/// RFC 4648 §5 base64url without padding.
public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public static func decode(_ text: String) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map(Array.init)
    }
}
