import CallContract
import Crypto

extension CallSubmission {
    /// A digest of what the call asks for (everything but the call id; devices in token order):
    /// the same request again has the same fingerprint; a different one under the same id does not.
    /// Idempotency is per tenant, so the key that asks is not part of it (a tenant's keys share its calls).
    public func fingerprint(ringTimeoutSeconds effective: Int) -> [UInt8] {
        // A length-prefixed canonical form (no JSON encoder on the hot path): every string as its
        // UTF-8 length then bytes, absent values as a length no string has.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        func put(_ text: String?) {
            guard let text else { return bytes.append(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF]) }
            let count = UInt32(truncatingIfNeeded: text.utf8.count)
            bytes.append(contentsOf: [UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)])
            bytes.append(contentsOf: text.utf8)
        }
        put(app)
        put(String(devices.count))
        for device in devices.sorted(by: { $0.token.utf8.lexicographicallyPrecedes($1.token.utf8) }) {
            put(device.token)
            // An Android device has no environment: its platform takes the place (no environment has that name).
            put(device.environment?.rawValue ?? device.platform.rawValue)
            put(device.id)
        }
        put(caller.handle)
        put(caller.handleType.rawValue)
        put(caller.displayName)
        put(hasVideo ? "1" : "0")
        put(String(effective))
        put(maxDurationSeconds.map { String($0) })
        put(String(attributes.count))
        for (key, value) in attributes.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            put(key)
            put(value)
        }
        return Array(SHA256.hash(data: bytes))
    }
}
