import JSONBytes

/// A strict JSON syntax check (RFC 8259) without building any values: the simulator only needs to know that a
/// payload is a JSON object, and doing that with `JSONSerialization` cost more than the rest of a request.
enum JSONSyntax {
    /// Nesting deeper than this is refused (bounded recursion on untrusted input).
    static let maximumDepth = 512

    /// Whether `bytes` is exactly one JSON object, with optional whitespace around it.
    static func isObject(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var parser = Parser(bytes: bytes)
        parser.skipWhitespace()
        guard parser.peek == UInt8(ascii: "{"), parser.value(depth: 0) else { return false }
        parser.skipWhitespace()
        return parser.index == bytes.count
    }

    private struct Parser {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            index = JSONBytes.skipWhitespace(bytes, from: index)
        }

        mutating func consume(_ byte: UInt8) -> Bool {
            guard peek == byte else { return false }
            index += 1
            return true
        }

        mutating func value(depth: Int) -> Bool {
            guard depth < JSONSyntax.maximumDepth, let byte = peek else { return false }
            switch byte {
            case UInt8(ascii: "{"): return object(depth: depth + 1)
            case UInt8(ascii: "["): return array(depth: depth + 1)
            case UInt8(ascii: "\""): return string()
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return number()
            }
        }

        mutating func object(depth: Int) -> Bool {
            index += 1  // {
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return true }
            while true {
                skipWhitespace()
                guard peek == UInt8(ascii: "\""), string() else { return false }
                skipWhitespace()
                guard consume(UInt8(ascii: ":")) else { return false }
                skipWhitespace()
                guard value(depth: depth) else { return false }
                skipWhitespace()
                if consume(UInt8(ascii: "}")) { return true }
                guard consume(UInt8(ascii: ",")) else { return false }
            }
        }

        mutating func array(depth: Int) -> Bool {
            index += 1  // [
            skipWhitespace()
            if consume(UInt8(ascii: "]")) { return true }
            while true {
                skipWhitespace()
                guard value(depth: depth) else { return false }
                skipWhitespace()
                if consume(UInt8(ascii: "]")) { return true }
                guard consume(UInt8(ascii: ",")) else { return false }
            }
        }

        mutating func string() -> Bool {
            index += 1  // opening quote
            while let byte = peek {
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return true
                case UInt8(ascii: "\\"):
                    guard let escaped = peek else { return false }
                    index += 1
                    if JSONBytes.isShortEscape(escaped) { continue }
                    guard escaped == UInt8(ascii: "u"), JSONBytes.hex4(bytes, at: index) != nil else { return false }
                    index += 4
                case 0..<0x20:
                    return false  // control characters must be escaped
                default:
                    continue
                }
            }
            return false
        }

        mutating func number() -> Bool {
            guard let end = JSONBytes.numberEnd(bytes, from: index) else { return false }
            index = end
            return true
        }

        mutating func literal(_ word: StaticString) -> Bool {
            guard JSONBytes.hasLiteral(word, in: bytes, at: index) else { return false }
            index += word.utf8CodeUnitCount
            return true
        }
    }
}
