import Crypto
import Locking

/// The `apns-id` of a delivery, derived from the call so every attempt (and every worker that
/// retries it) uses the same id: SHA-256 over callId, device key and replay generation, shaped
/// as a lower-case RFC 4122 UUID (version 5 layout). Support can match Apple's records to calls.
public enum APNSID {
    public static func make(callId: String, deviceKey: String, replay: Int) -> String {
        // One buffer sized up front, one hash call: no interpolated string, lower-cased copy or array copy of it.
        let callId = callId.lowercasedIfNeeded(), replay = String(replay)
        var message: [UInt8] = []
        message.reserveCapacity(17 + callId.utf8.count + deviceKey.utf8.count + replay.utf8.count + 2)
        message.append(contentsOf: "callpush-apns-id\n".utf8)
        message.append(contentsOf: callId.utf8)
        message.append(UInt8(ascii: "\n"))
        message.append(contentsOf: deviceKey.utf8)
        message.append(UInt8(ascii: "\n"))
        message.append(contentsOf: replay.utf8)
        return SHA256.hash(data: message).withUnsafeBytes { digest in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { bytes in
                _ = bytes.initialize(from: digest.prefix(16))
                bytes[6] = (bytes[6] & 0x0F) | 0x50
                bytes[8] = (bytes[8] & 0x3F) | 0x80
                return Hex.uuidText(bytes)
            }
        }
    }
}
