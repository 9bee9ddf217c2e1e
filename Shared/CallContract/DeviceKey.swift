import Crypto
import Locking

/// A stable, non-reversible key for a device token: the first 16 bytes of SHA-256 over the
/// lower-case hex token, as 32 hex digits. Statuses, acks and dedupe state carry this instead of
/// the token, so the token itself never has to appear outside the request and the push.
public enum DeviceKey {
    public static func make(token: String) -> String {
        var lowered = token.lowercasedIfNeeded()
        let digest = lowered.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
        return digest.withUnsafeBytes { Hex.encode($0.prefix(16)) }
    }
}
