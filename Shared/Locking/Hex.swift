/// Hexadecimal digits read and written in one place (JSON `\u` escapes, hex-encoded secrets, hashes
/// and ids, UUID text).
public enum Hex {
    /// The value of a hexadecimal digit (either case), nil for any other byte.
    @inlinable
    public static func value(of byte: UInt8) -> UInt8? {
        notDigit(byte) == 0 ? nibble(byte) : nil
    }

    /// Whether every byte of `text` is a hexadecimal digit (either case); true for "". Device tokens
    /// are checked with it on every ring, so a native string's bytes are read in place, in a loop
    /// without a branch per byte.
    @inlinable
    public static func isDigits(_ text: String) -> Bool {
        if let all = text.utf8.withContiguousStorageIfAvailable({ bytes -> Bool in
            var outside: UInt8 = 0
            for byte in bytes { outside |= notDigit(byte) }
            return outside == 0
        }) {
            return all
        }
        return text.utf8.allSatisfy { value(of: $0) != nil }
    }

    /// Reads 8-4-4-4-12 UUID text (hex digits of either case, dashes at 8, 13, 18 and 23) into the 16
    /// bytes of `out`; false for anything else (`out` then holds no meaningful value).
    /// `UUID(uuidString:)` goes through `sscanf`, and ids are read several times per ring, so a
    /// native string's bytes are read in place, without a branch that depends on a digit.
    @inlinable
    public static func readUUID(_ text: String, into out: UnsafeMutableRawBufferPointer) -> Bool {
        precondition(out.count >= 16, "a UUID has 16 bytes")
        if let read = text.utf8.withContiguousStorageIfAvailable({ readUUID(bytes: $0, into: out) }) { return read }
        var copy = text
        return copy.withUTF8 { readUUID(bytes: $0, into: out) }
    }

    @inlinable
    static func readUUID(bytes: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableRawBufferPointer) -> Bool {
        let dash = UInt8(ascii: "-")
        guard bytes.count == 36, bytes[8] == dash, bytes[13] == dash, bytes[18] == dash, bytes[23] == dash else { return false }
        var outside: UInt8 = 0
        var index = 0
        for byte in 0..<16 {
            if index == 8 || index == 13 || index == 18 || index == 23 { index += 1 }
            let high = bytes[index], low = bytes[index + 1]
            outside |= notDigit(high) | notDigit(low)
            out[byte] = nibble(high) << 4 | nibble(low)
            index += 2
        }
        return outside == 0
    }

    /// 1 for a byte that is not a hexadecimal digit (either case), else 0.
    @inlinable @inline(__always)
    static func notDigit(_ byte: UInt8) -> UInt8 {
        let letter = (byte | 0x20) &- UInt8(ascii: "a")  // a–f (or A–F) → 0–5
        let digit = byte &- UInt8(ascii: "0")  // 0–9 → 0–9
        return (letter < 6 ? 0 : 1) & (digit < 10 ? 0 : 1)
    }

    /// The value of a hexadecimal digit (either case): its low four bits, plus 9 for a letter.
    /// Meaningless for other bytes.
    @inlinable @inline(__always)
    static func nibble(_ byte: UInt8) -> UInt8 {
        (byte & 0x0F) &+ 9 &* (byte >> 6)
    }

    /// Whether `text` is 8-4-4-4-12 UUID text (hex digits of either case).
    @inlinable
    public static func isUUIDText(_ text: String) -> Bool {
        withUnsafeTemporaryAllocation(byteCount: 16, alignment: 1) { readUUID(text, into: $0) }
    }

    /// The lower-case digit of a value below 16.
    @inlinable
    public static func digit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") &+ value : UInt8(ascii: "a") &+ (value &- 10)
    }

    /// `bytes` as lower-case hex, two digits a byte (what `String(format: "%02x")` per byte gives).
    @inlinable
    public static func encode<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            var index = 0
            for byte in bytes {
                out[index] = digit(byte >> 4)
                out[index + 1] = digit(byte & 0x0F)
                index += 2
            }
            return index
        }
    }

    /// 16 bytes as lower-case UUID text (8-4-4-4-12 digits); APNs echoes ids lower-case, and
    /// Foundation's `uuidString` is upper-case and formats with `snprintf`.
    @inlinable
    public static func uuidText<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        precondition(bytes.count == 16, "a UUID has 16 bytes")
        return String(unsafeUninitializedCapacity: 36) { out in
            var index = 0
            for (position, byte) in bytes.enumerated() {
                if position == 4 || position == 6 || position == 8 || position == 10 {
                    out[index] = UInt8(ascii: "-")
                    index += 1
                }
                out[index] = digit(byte >> 4)
                out[index + 1] = digit(byte & 0x0F)
                index += 2
            }
            return index
        }
    }

    /// `count` random bytes as lower-case hex (`2 × count` digits): ids, tokens and secrets made up
    /// by tools and tests.
    public static func random<Generator: RandomNumberGenerator>(bytes count: Int, using generator: inout Generator) -> String {
        encode((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// `count` random bytes from the system generator as lower-case hex.
    public static func random(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return random(bytes: count, using: &generator)
    }
}
