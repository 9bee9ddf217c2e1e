import JSONBytes

extension FCMMessageValidator {
    /// A byte-level reader of the well-formed data message every FCM client sends: a token target, string
    /// data, android fields of the known types, optionally `validate_only`. Any JSON formatting, member order
    /// and string escape (surrogate pairs included) is read.
    ///
    /// It never refuses: for anything else — other message fields (`notification`, `topic`, …), a wrong type,
    /// `null`, a duplicate key or both spellings of one field, a lone surrogate, invalid UTF-8, bad syntax —
    /// it gives `nil`, and the generic walk (``parseGeneric(_:)``, on `JSONDecoder`) decides and names the
    /// error. What it accepts, the generic walk reads as the same ``Parsed`` (`ValidationTests`).
    ///
    /// `JSONDecoder` with keyed containers cost several times the rest of a request (HTTP/2 included).
    enum FastReader {
        /// The message, or nil when the generic walk must decide.
        static func parse(_ body: [UInt8]) -> Parsed? {
            body.withUnsafeBytes { bytes -> Parsed? in
                var reader = Reader(bytes: bytes)
                guard let parsed = reader.top() else { return nil }
                reader.skipSpace()
                return reader.index == bytes.count ? parsed : nil
            }
        }
    }

    private struct Reader {
        enum Member {
            case key(String)
            case end
            case bad
        }

        let bytes: UnsafeRawBufferPointer
        var index = 0

        init(bytes: UnsafeRawBufferPointer) {
            self.bytes = bytes
        }

        // MARK: The message's shape

        mutating func top() -> Parsed? {
            var parsed = Parsed()
            var seen: [String] = []
            let read = eachMember { reader, key in
                guard !seen.contains(key) else { return false }
                seen.append(key)
                switch key {
                case "message": return reader.message(&parsed)
                case "validate_only", "validateOnly":
                    guard let flag = reader.bool() else { return false }
                    parsed.validateOnly = flag
                    return true
                default: return false
                }
            }
            guard read, seen.contains("message"), !(seen.contains("validate_only") && seen.contains("validateOnly")) else { return nil }
            return parsed
        }

        mutating func message(_ parsed: inout Parsed) -> Bool {
            var seen: [String] = []
            return eachMember { reader, key in
                guard !seen.contains(key) else { return false }
                seen.append(key)
                switch key {
                case "token":
                    guard let token = reader.string() else { return false }
                    parsed.token = token
                    parsed.targets = ["token"]
                case "data":
                    guard let data = reader.stringMap() else { return false }
                    parsed.data = data
                case "android":
                    guard let android = reader.android() else { return false }
                    parsed.android = android
                default: return false
                }
                return true
            }
        }

        mutating func android() -> RecordedFCMMessage.Android? {
            var fields = RecordedFCMMessage.Android()
            var seen: [String] = []
            let read = eachMember { reader, key in
                // One entry per field, whichever spelling: both spellings are left to the generic walk.
                guard let field = Self.androidField[key], !seen.contains(field) else { return false }
                seen.append(field)
                switch field {
                case "priority": guard let value = reader.string() else { return false }; fields.priority = value
                case "ttl": guard let value = reader.string() else { return false }; fields.ttl = value
                case "collapse_key": guard let value = reader.string() else { return false }; fields.collapseKey = value
                case "restricted_package_name": guard let value = reader.string() else { return false }; fields.restrictedPackageName = value
                case "direct_boot_ok": guard let value = reader.bool() else { return false }; fields.directBootOk = value
                case "bandwidth_constrained_ok", "restricted_satellite_ok": guard reader.bool() != nil else { return false }
                case "data": guard let value = reader.stringMap() else { return false }; fields.data = value
                default: return false
                }
                return true
            }
            return read ? fields : nil
        }

        /// Both spellings of the android fields read here → the field's one name.
        static let androidField: [String: String] = [
            "priority": "priority", "ttl": "ttl", "collapse_key": "collapse_key", "collapseKey": "collapse_key",
            "restricted_package_name": "restricted_package_name", "restrictedPackageName": "restricted_package_name",
            "direct_boot_ok": "direct_boot_ok", "directBootOk": "direct_boot_ok",
            "bandwidth_constrained_ok": "bandwidth_constrained_ok", "bandwidthConstrainedOk": "bandwidth_constrained_ok",
            "restricted_satellite_ok": "restricted_satellite_ok", "restrictedSatelliteOk": "restricted_satellite_ok",
            "data": "data",
        ]

        /// An object of strings, no key twice.
        mutating func stringMap() -> [String: String]? {
            var map: [String: String] = [:]
            let read = eachMember { reader, key in
                guard map[key] == nil, let value = reader.string() else { return false }
                map[key] = value
                return true
            }
            return read ? map : nil
        }

        /// Walks one object: `{`, then each member's key (its `:` consumed) to `readValue`, which reads the
        /// value and says whether it is good. True past the closing `}`; false for bad syntax or a refused member.
        mutating func eachMember(_ readValue: (inout Reader, String) -> Bool) -> Bool {
            guard begin() else { return false }
            var first = true
            while true {
                switch member(first: &first) {
                case .bad: return false
                case .end: return true
                case .key(let key): guard readValue(&self, key) else { return false }
                }
            }
        }

        // MARK: JSON

        mutating func skipSpace() {
            index = JSONBytes.skipWhitespace(bytes, from: index)
        }

        /// `{`, after optional whitespace.
        mutating func begin() -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return false }
            index += 1
            return true
        }

        /// The next member's key (its `:` consumed), or the object's end (its `}` consumed).
        mutating func member(first: inout Bool) -> Member {
            skipSpace()
            guard index < bytes.count else { return .bad }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .end
            }
            if first {
                first = false
            } else {
                guard bytes[index] == UInt8(ascii: ",") else { return .bad }
                index += 1
                skipSpace()
            }
            guard let key = string() else { return .bad }
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return .bad }
            index += 1
            return .key(key)
        }

        mutating func bool() -> Bool? {
            skipSpace()
            if literal("true") { return true }
            if literal("false") { return false }
            return nil
        }

        mutating func literal(_ word: StaticString) -> Bool {
            guard JSONBytes.hasLiteral(word, in: bytes, at: index) else { return false }
            index += word.utf8CodeUnitCount
            return true
        }

        /// A string value, after optional whitespace; nil for anything not a valid JSON string of valid UTF-8.
        mutating func string() -> String? {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            index += 1
            let start = index
            var ascii = true
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = UnsafeBufferPointer(rebasing: bytes.assumingMemoryBound(to: UInt8.self)[start..<index])
                    index += 1
                    // ASCII is valid UTF-8 as it is; the generic validation cost more than the rest of the reader.
                    return ascii ? String(decoding: text, as: UTF8.self) : String(validating: text, as: UTF8.self)
                }
                if byte == UInt8(ascii: "\\") { return escapedString(from: start) }
                if byte < 0x20 { return nil }
                ascii = ascii && byte < 0x80
                index += 1
            }
            return nil
        }

        /// The rest of a string that has escapes, `index` at the first backslash.
        private mutating func escapedString(from start: Int) -> String? {
            var text = Array(bytes[start..<index])
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(validating: text, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { return nil }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escape)
                    case UInt8(ascii: "b"): text.append(0x08)
                    case UInt8(ascii: "f"): text.append(0x0C)
                    case UInt8(ascii: "n"): text.append(0x0A)
                    case UInt8(ascii: "r"): text.append(0x0D)
                    case UInt8(ascii: "t"): text.append(0x09)
                    case UInt8(ascii: "u"):
                        guard let scalar = unicodeEscape() else { return nil }
                        text.append(contentsOf: String(Character(scalar)).utf8)
                    default: return nil
                    }
                default:
                    guard byte >= 0x20 else { return nil }
                    text.append(byte)
                }
            }
            return nil
        }

        /// `XXXX` after `\u`, or a surrogate pair `XXXX\uXXXX`; nil for a lone surrogate.
        private mutating func unicodeEscape() -> Unicode.Scalar? {
            guard let high = hex4() else { return nil }
            switch high {
            case 0xD800...0xDBFF:
                guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { return nil }
                index += 2
                guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
            case 0xDC00...0xDFFF:
                return nil
            default:
                return Unicode.Scalar(high)
            }
        }

        private mutating func hex4() -> UInt32? {
            guard let value = JSONBytes.hex4(bytes, at: index) else { return nil }
            index += 4
            return UInt32(value)
        }
    }
}
