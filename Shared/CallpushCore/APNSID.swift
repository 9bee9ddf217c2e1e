import Crypto

/// The `apns-id` of a delivery, derived from the call so every attempt (and every worker that
/// retries it) uses the same id: SHA-256 over callId, device key and replay generation, shaped
/// as a lower-case RFC 4122 UUID (version 5 layout). Support can match Apple's records to calls.
public enum APNSID {
    public static func make(callId: String, deviceKey: String, replay: Int) -> String {
        var bytes = Array(SHA256.hash(data: Array("callpush-apns-id\n\(callId.lowercased())\n\(deviceKey)\n\(replay)".utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
