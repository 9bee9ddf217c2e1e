import Foundation
#if canImport(Locking)
// The fuzz build (scripts/fuzz) compiles this module's sources with Locking's Hex.swift and
// JSONBytes's as one module.
import Locking
#endif
#if canImport(JSONBytes)
import JSONBytes
#endif

/// Writes contract documents straight to bytes, byte for byte what ``ContractCoding/makeEncoder()``
/// (Foundation's `JSONEncoder` with sorted keys and unescaped slashes) produces for the same value —
/// at a small fraction of its cost (the hot paths: every ring dispatch publishes, every status and
/// VoIP payload a worker sends). `ContractJSONWriterTests` compares the two on generated values.
///
/// Callers write an object's keys in sorted order (UTF-8 byte order, as `.sortedKeys` does).
public struct ContractJSONWriter {
    public private(set) var bytes: [UInt8] = []
    private var needsComma = false

    public init(capacity: Int = 512) {
        bytes.reserveCapacity(capacity)
    }

    /// The document as `Data`.
    public var data: Data { Data(bytes) }

    /// `{ … }`: `body` writes the members.
    public mutating func object(_ body: (inout ContractJSONWriter) -> Void) {
        bytes.append(UInt8(ascii: "{"))
        let outer = needsComma
        needsComma = false
        body(&self)
        bytes.append(UInt8(ascii: "}"))
        needsComma = outer
    }

    /// A member whose value `body` writes (an object).
    public mutating func member(_ key: StaticString, _ body: (inout ContractJSONWriter) -> Void) {
        self.key(key)
        object(body)
    }

    public mutating func member(_ key: StaticString, _ value: String) {
        self.key(key)
        string(value)
    }

    public mutating func member(_ key: StaticString, _ value: Int) {
        self.key(key)
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func member(_ key: StaticString, _ value: Bool) {
        self.key(key)
        bytes.append(contentsOf: value ? "true".utf8 : "false".utf8)
    }

    /// A timestamp in the contract's form (``ContractCoding/format(_:)``).
    public mutating func member(_ key: StaticString, _ value: Date) {
        self.key(key)
        bytes.append(UInt8(ascii: "\""))
        ContractCoding.appendTimestamp(value, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// A string-to-string map, its keys in UTF-8 byte order.
    public mutating func member(_ key: StaticString, _ value: [String: String]) {
        self.key(key)
        bytes.append(UInt8(ascii: "{"))
        var first = true
        for (name, text) in value.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            string(name)
            bytes.append(UInt8(ascii: ":"))
            string(text)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// An array of objects, `body` writing each element's members.
    public mutating func member<Elements: Sequence>(_ key: StaticString, objects: Elements,
                                                    _ body: (inout ContractJSONWriter, Elements.Element) -> Void) {
        self.key(key)
        bytes.append(UInt8(ascii: "["))
        var first = true
        for element in objects {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            object { body(&$0, element) }
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// `"key":null`.
    public mutating func null(_ key: StaticString) {
        self.key(key)
        bytes.append(contentsOf: "null".utf8)
    }

    private mutating func key(_ key: StaticString) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\b \t \n \f \r` or `\u00XX`,
    /// everything else (slashes, non-ASCII) as is.
    private mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var start = 0
            while true {
                let index = JSONBytes.unescapedEnd(utf8, from: start)
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                guard index < utf8.count else { break }
                let byte = utf8[index]
                start = index + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                default:
                    bytes.append(contentsOf: "u00".utf8)
                    bytes.append(Hex.digit(byte >> 4))
                    bytes.append(Hex.digit(byte & 0xF))
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
