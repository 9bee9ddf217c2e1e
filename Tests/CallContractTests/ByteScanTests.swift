import Foundation
import Locking
import Testing

/// The byte scans on every ring's path (`Hex.isDigits` and `lowercasedIfNeeded` for device tokens,
/// `Hex.readUUID` for call ids and apns-ids) against their plain definitions.
@Suite struct ByteScanTests {
    static func isHexReference(_ text: String) -> Bool {
        text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0) }
    }

    /// Strings of 0, 1, 63, 64 and 65 bytes with any one byte changed (a UTF-8 sequence where a
    /// byte alone is not valid), around a valid lower-case token.
    static var variants: [String] {
        let token = String(repeating: "0123456789abcdef", count: 4)
        var out = ["", "a", "G", token, token.uppercased(), token + "0", String(token.dropLast())]
        for position in [0, 31, 63] {
            for byte in 0...0x7F {
                var bytes = Array(token.utf8)
                bytes[position] = UInt8(byte)
                out.append(String(decoding: bytes, as: UTF8.self))
            }
            for scalar in ["é", "Ａ", "٣", "\u{202E}"] {  // non-ASCII, a full-width A, an Arabic-Indic 3, bidi
                var text = token
                text.insert(contentsOf: scalar, at: text.index(text.startIndex, offsetBy: position))
                out.append(text)
            }
        }
        return out
    }

    @Test func hexDigitsMatchesTheDefinition() {
        for text in Self.variants {
            #expect(Hex.isDigits(text) == Self.isHexReference(text), "\(Array(text.utf8))")
        }
        #expect(Hex.isDigits("09afAF"))
        #expect(!Hex.isDigits("0g"))
        #expect(!Hex.isDigits("@`/:GZ"))
    }

    @Test func hexValueOfEveryByte() {
        for byte in UInt8.min...UInt8.max {
            let text = String(UnicodeScalar(byte))
            let expected = Self.isHexReference(String(decoding: [byte], as: UTF8.self)) ? UInt8(text, radix: 16) : nil
            #expect(Hex.value(of: byte) == expected, "\(byte)")
        }
    }

    @Test func lowercasedIfNeededIsLowercased() {
        for text in Self.variants {
            #expect(text.lowercasedIfNeeded() == text.lowercased(), "\(Array(text.utf8))")
        }
    }

    @Test func uuidTextIsWhatFoundationReads() {
        let id = "6F1A4B1E-59d5-4c0b-9C40-0b7e3d2f1a77"
        var texts = [id, id.lowercased(), "", String(id.dropLast()), id + "0", id.replacingOccurrences(of: "-", with: "")]
        for position in [0, 1, 8, 13, 34, 35] {
            for byte in 0...0x7F {
                var bytes = Array(id.utf8)
                bytes[position] = UInt8(byte)
                texts.append(String(decoding: bytes, as: UTF8.self))
            }
        }
        // A two-byte character in place of two digits keeps the length at 36 bytes.
        texts.append("é" + id.dropFirst(2))
        texts.append(String(id.dropLast(2)) + "é")
        for text in texts {
            // Foundation reads with `sscanf`, which also takes a leading space or sign; the contract takes
            // only the canonical form, which Foundation writes back unchanged.
            let expected = UUID(uuidString: text).flatMap { $0.uuidString == text.uppercased() ? $0 : nil }
            #expect(Hex.isUUIDText(text) == (expected != nil), "\(text)")
            var bytes = [UInt8](repeating: 0, count: 16)
            let read = bytes.withUnsafeMutableBytes { Hex.readUUID(text, into: $0) }
            #expect(read == (expected != nil), "\(text)")
            if read, let expected { #expect(bytes == withUnsafeBytes(of: expected.uuid) { Array($0) }, "\(text)") }
        }
    }
}
