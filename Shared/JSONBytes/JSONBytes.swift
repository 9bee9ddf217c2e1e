#if canImport(Locking)
// The fuzz build (scripts/fuzz) compiles these sources with Locking's Hex.swift as one module.
import Locking
#endif

/// The byte-level grammar of JSON (RFC 8259) that the hand-written readers share: the contract's
/// fast reader and status scanner, the FCM simulator's message reader and the APNs simulator's
/// syntax check. Each reader keeps its own walk (what it builds, what it refuses, what it leaves to
/// `JSONDecoder`); the rules for whitespace, literals, `\u` escapes and numbers live here once.
///
/// Everything is `@inlinable` on an `UnsafeRawBufferPointer`: the readers are on hot paths and
/// must not pay a call or an allocation per byte.
public enum JSONBytes {
    /// JSON's insignificant whitespace: space, tab, line feed, carriage return.
    @inlinable
    public static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    /// The index of the first byte at or after `index` that is not whitespace (`bytes.count` at the end).
    @inlinable
    public static func skipWhitespace(_ bytes: UnsafeRawBufferPointer, from index: Int) -> Int {
        var index = index
        while index < bytes.count, isWhitespace(bytes[index]) { index += 1 }
        return index
    }

    /// Whether `word` (`true`, `false`, `null`, or any fixed text) stands at `index`.
    @inlinable
    public static func hasLiteral(_ word: StaticString, in bytes: UnsafeRawBufferPointer, at index: Int) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        return true
    }

    /// The letters that may follow a backslash on their own: `"` `\` `/` `b` `f` `n` `r` `t`
    /// (`u` takes four hex digits: ``hex4(_:at:)``).
    @inlinable
    public static func isShortEscape(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
             UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            true
        default:
            false
        }
    }

    /// The code unit of the four hex digits of a `\u` escape starting at `index` (just after the
    /// `u`); nil when fewer than four bytes are left or one is not a hex digit. Surrogates are the
    /// caller's to judge.
    @inlinable
    public static func hex4(_ bytes: UnsafeRawBufferPointer, at index: Int) -> UInt16? {
        guard bytes.count - index >= 4 else { return nil }
        var value: UInt16 = 0
        for offset in 0..<4 {
            guard let digit = Hex.value(of: bytes[index + offset]) else { return nil }
            value = value << 4 | UInt16(digit)
        }
        return value
    }

    /// The index just past a well-formed JSON number starting at `index` (`-`, no leading zeros,
    /// an optional fraction and exponent), or nil when there is none.
    @inlinable
    public static func numberEnd(_ bytes: UnsafeRawBufferPointer, from index: Int) -> Int? {
        var index = index
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        let start = index
        index = digitsEnd(bytes, from: index)
        let digits = index - start
        guard digits > 0, !(digits > 1 && bytes[start] == UInt8(ascii: "0")) else { return nil }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            let fraction = index + 1
            index = digitsEnd(bytes, from: fraction)
            guard index > fraction else { return nil }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            let exponent = index
            index = digitsEnd(bytes, from: exponent)
            guard index > exponent else { return nil }
        }
        return index
    }

    /// The index of the first byte at or after `index` that a JSON string must escape (`"`, `\` or
    /// a control character below 0x20), or `bytes.count`: what a writer copies as it is. Eight bytes
    /// are tested at a time (every string a worker writes — ids, keys, tokens, names — is clean).
    @inlinable
    public static func unescapedEnd(_ bytes: UnsafeBufferPointer<UInt8>, from index: Int) -> Int {
        var index = index
        if let base = bytes.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
            while bytes.count - index >= 8 {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
                // Each term is non-zero when some byte is below 0x20, is `"` (0x22), or is `\` (0x5C).
                let control = (word &- ones &* 0x20) & ~word & highs
                let quote = ((word ^ (ones &* 0x22)) &- ones) & ~(word ^ (ones &* 0x22)) & highs
                let backslash = ((word ^ (ones &* 0x5C)) &- ones) & ~(word ^ (ones &* 0x5C)) & highs
                if control | quote | backslash != 0 { break }
                index += 8
            }
        }
        while index < bytes.count, bytes[index] >= 0x20, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\") {
            index += 1
        }
        return index
    }

    /// The index of the first byte at or after `index` that is not a decimal digit.
    @inlinable
    public static func digitsEnd(_ bytes: UnsafeRawBufferPointer, from index: Int) -> Int {
        var index = index
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
        return index
    }
}
