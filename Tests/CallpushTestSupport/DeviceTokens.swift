/// A valid-looking APNs device token, distinct per seed: `seed` in hex, zero-padded to `digits`
/// lower-case hex digits (64: a 32-byte token).
public func hexToken(_ seed: Int, digits: Int = 64) -> String {
    let hex = String(seed, radix: 16)
    return String(repeating: "0", count: max(0, digits - hex.count)) + hex
}
