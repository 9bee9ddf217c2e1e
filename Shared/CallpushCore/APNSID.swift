import Crypto
import Locking

/// The `apns-id` of a delivery, derived from the call so every attempt (and every worker that
/// retries it) uses the same id: SHA-256 over callId, device key and replay generation, shaped
/// as a lower-case RFC 4122 UUID (version 5 layout). Support can match Apple's records to calls.
public enum APNSID {
    public static func make(callId: String, deviceKey: String, replay: Int) -> String {
        // Hashed piece by piece where the strings lie: no joined copy per push.
        var hash = SHA256()
        func add(_ text: String) { text.withUTF8Bytes { hash.update(bufferPointer: $0) } }
        add("callpush-apns-id\n"); add(callId.lowercasedIfNeeded()); add("\n"); add(deviceKey); add("\n"); add(String(replay))
        return hash.finalize().withUnsafeBytes { digest in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { bytes in
                _ = bytes.initialize(from: digest.prefix(16))
                bytes[6] = (bytes[6] & 0x0F) | 0x50
                bytes[8] = (bytes[8] & 0x3F) | 0x80
                return Hex.uuidText(bytes)
            }
        }
    }
}
