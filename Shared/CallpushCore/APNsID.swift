import Crypto

/// The `apns-id` of a delivery, derived from the call so every attempt (and every worker that
/// retries it) uses the same id: SHA-256 over callId, device key and replay generation, shaped
/// as a lower-case RFC 4122 UUID (version 5 layout). Support can match Apple's records to calls.
public enum APNsID {
    public static func make(callId: String, deviceKey: String, replay: Int) -> String {
        var bytes = Array(SHA256.hash(data: Array("callpush-apns-id\n\(callId.lowercased())\n\(deviceKey)\n\(replay)".utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { byte -> String in
            let s = String(byte, radix: 16)
            return s.count == 1 ? "0" + s : s
        }.joined()
        let chars = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(chars[$0]) }.joined(separator: "-")
    }
}
