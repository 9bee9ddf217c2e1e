import CallContract
import Crypto
import Foundation
import Locking

/// The per-delivery token the worker puts in the VoIP payload and dispatch checks on `ack`.
///
/// Version 2 (``token(callId:deviceKey:replay:ringDeadline:)``) carries the ring deadline and the
/// replay generation, so dispatch can refuse it once the deadline plus a grace has passed and
/// bind the ack to that generation: base64url (no padding) of
/// `0x02 ‖ ringDeadline (Unix ms, Int64 BE) ‖ replay (UInt16 BE) ‖ HMAC-SHA256(secret,
/// "callpush-ack-v2\n" ‖ callId ‖ "\n" ‖ deviceKey ‖ "\n" ‖ the 11 bytes before the MAC)`, 58 characters.
/// Version 1 (``token(callId:deviceKey:)``, 43 characters) is the bare HMAC over callId and device
/// key, without expiry; dispatch accepts it only while its view knows the call's deadline.
/// Only the device that received the push can present either.
public struct AckTokenSigner: Sendable {
    /// What a valid token says besides "this (call, device)".
    public struct Claims: Sendable, Hashable {
        /// 1 or 2.
        public var version: Int
        /// The replay generation the token was issued for (version 2).
        public var replay: Int?
        /// The ring deadline of that delivery (version 2).
        public var ringDeadline: Date?

        public init(version: Int, replay: Int? = nil, ringDeadline: Date? = nil) {
            self.version = version
            self.replay = replay
            self.ringDeadline = ringDeadline
        }
    }

    /// Characters of a version-2 token (the VoIP payload size check counts them).
    public static let tokenLength = VoIPPayload.ackTokenLength

    /// An HMAC already keyed with the secret (its inner and outer pads hashed once), copied for each token
    /// instead of keying a new one per push. A value type whose digest state is copied on write, so copies
    /// made on different threads never share mutable state (swift-crypto does not mark it `Sendable`).
    nonisolated(unsafe) private let keyed: HMAC<SHA256>

    /// The secret must be at least 32 bytes (read it from a file or the environment, never a flag).
    public init(secret: [UInt8]) throws(AckTokenError) {
        guard secret.count >= 32 else { throw AckTokenError.secretTooShort(secret.count) }
        self.keyed = HMAC<SHA256>(key: SymmetricKey(data: secret))
    }

    /// A version-2 token for one delivery: valid for this (call, device, replay generation) and
    /// carrying its ring deadline.
    public func token(callId: String, deviceKey: String, replay: Int, ringDeadline: Date) -> String {
        var token = Self.header(replay: replay, ringDeadline: ringDeadline)
        mac(version: 2, callId, deviceKey, header: token).withUnsafeBytes { token.append(contentsOf: $0) }
        return Base64URL.encode(token)
    }

    /// A version-1 token (no expiry, no replay generation): what workers before version 2 issued.
    public func token(callId: String, deviceKey: String) -> String {
        Base64URL.encode(Array(mac(version: 1, callId, deviceKey, header: nil)))
    }

    /// Constant-time check of a presented token of either version (expiry not considered).
    public func verify(_ token: String, callId: String, deviceKey: String) -> Bool {
        claims(token, callId: callId, deviceKey: deviceKey) != nil
    }

    /// What a valid token says, or nil when it is not valid for this (call, device).
    public func claims(_ token: String, callId: String, deviceKey: String) -> Claims? {
        guard token.utf8.count <= 64, let bytes = Base64URL.decode(token) else { return nil }
        switch bytes.count {
        case 32:
            // swift-crypto compares a MAC with bytes in constant time.
            guard mac(version: 1, callId, deviceKey, header: nil) == bytes else { return nil }
            return Claims(version: 1)
        case 43 where bytes[0] == 2:
            let header = Array(bytes[0..<11])
            guard mac(version: 2, callId, deviceKey, header: header) == bytes[11...] else { return nil }
            var millis: Int64 = 0
            for byte in header[1..<9] { millis = millis << 8 | Int64(byte) }
            let replay = Int(header[9]) << 8 | Int(header[10])
            return Claims(version: 2, replay: replay, ringDeadline: Date(timeIntervalSince1970: Double(millis) / 1000))
        default:
            return nil
        }
    }

    /// The MAC both versions carry: over `"callpush-ack-v1\n" ‖ callId ‖ "\n" ‖ deviceKey`, or
    /// `"callpush-ack-v2\n" ‖ callId ‖ "\n" ‖ deviceKey ‖ "\n" ‖ header`, callId lower-cased.
    /// Every push signs one: the message is assembled in one buffer sized up front and hashed in one
    /// update (each update of swift-crypto's HMAC costs more than the copy it would save).
    private func mac(version: Int, _ callId: String, _ deviceKey: String, header: [UInt8]?) -> HashedAuthenticationCode<SHA256> {
        let callId = callId.lowercasedIfNeeded()
        var message: [UInt8] = []
        message.reserveCapacity(16 + callId.utf8.count + deviceKey.utf8.count + 2 + (header?.count ?? 0))
        message.append(contentsOf: (version == 1 ? "callpush-ack-v1\n" : "callpush-ack-v2\n").utf8)
        message.append(contentsOf: callId.utf8)
        message.append(UInt8(ascii: "\n"))
        message.append(contentsOf: deviceKey.utf8)
        if let header {
            message.append(UInt8(ascii: "\n"))
            message.append(contentsOf: header)
        }
        var hmac = keyed
        hmac.update(data: message)
        return hmac.finalize()
    }

    /// Version byte, deadline in Unix milliseconds and replay generation (clamped to their fields).
    private static func header(replay: Int, ringDeadline: Date) -> [UInt8] {
        let millis = Int64((ringDeadline.timeIntervalSince1970 * 1000).rounded(.down))
        let generation = UInt16(clamping: replay)
        var bytes: [UInt8] = [2]
        bytes.reserveCapacity(11 + 32)  // and the MAC `token` appends
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: millis >> Int64(shift))) }
        bytes.append(UInt8(generation >> 8))
        bytes.append(UInt8(generation & 0xFF))
        return bytes
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
