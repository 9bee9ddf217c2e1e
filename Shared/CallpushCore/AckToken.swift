import Crypto
import Foundation

/// The per-delivery token the worker puts in the VoIP payload and dispatch checks on `ack`:
/// HMAC-SHA256 over the call id and device key with a secret shared by workers and dispatch,
/// base64url without padding. Only the device that received the push can present it.
public struct AckTokenSigner: Sendable {
    /// Raw secret bytes (swift-crypto's `SymmetricKey` is not `Sendable`; a key is made per use).
    private let secret: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: secret) }
    /// An HMAC already keyed with the secret (its inner and outer pads hashed once), copied for each token
    /// instead of keying a new one per push. A value type whose digest state is copied on write, so copies
    /// made on different threads never share mutable state (swift-crypto does not mark it `Sendable`).
    nonisolated(unsafe) private let keyed: HMAC<SHA256>

    /// The secret must be at least 32 bytes (read it from a file or the environment, never a flag).
    public init(secret: [UInt8]) throws(AckTokenError) {
        guard secret.count >= 32 else { throw AckTokenError.secretTooShort(secret.count) }
        self.secret = secret
        self.keyed = HMAC<SHA256>(key: SymmetricKey(data: secret))
    }

    public func token(callId: String, deviceKey: String) -> String {
        var hmac = keyed
        hmac.update(data: message(callId, deviceKey))
        return Base64URL.encode(Array(hmac.finalize()))
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
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= bytes.count {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
            out.append(alphabet[Int(n & 63)])
            index += 3
        }
        let rest = bytes.count - index
        if rest > 0 {
            let n = UInt32(bytes[index]) << 16 | (rest == 2 ? UInt32(bytes[index + 1]) << 8 : 0)
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            if rest == 2 { out.append(alphabet[Int(n >> 6 & 63)]) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of unpadded base64url text, or nil when it is not (padding, `+`, `/` refused).
    public static func decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        var accumulator: UInt32 = 0
        var bits = 0
        for character in text.utf8 {
            let value: UInt8
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = character - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = character - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // A single leftover character (6 bits) is not base64; leftover bits must be zero.
        guard bits != 6, accumulator == 0 else { return nil }
        return out
    }
}
