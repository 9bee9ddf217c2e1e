import Foundation
#if canImport(JSONBytes)
// The fuzz build (scripts/fuzz) compiles this module's sources with JSONBytes's as one module.
import JSONBytes
#endif

/// A fast reader for contract documents, used in front of `JSONDecoder` on the hot paths (every
/// ring a worker takes in, every `POST /v1/calls`).
///
/// It reads any JSON formatting (whitespace, member order, string escapes including `\uXXXX`
/// surrogate pairs, UTF-8) of the values the contract uses: strings, integers without fraction or
/// exponent, `true` / `false` / `null`, objects and arrays. It gives `nil` — and the caller decodes
/// with the contract's `JSONDecoder` path, which then also produces the error — for anything it
/// is not sure about: object keys that are not plain printable ASCII, duplicate keys, numbers with
/// a fraction or exponent, lone surrogates, invalid UTF-8, and strings holding a control character
/// (which the contract refuses, naming the field). So the fast path never decides a refusal, and
/// what it accepts must decode to the same value through the slow path (`FastJSONTests`, the
/// `EventDecoder` and `DispatchRequest` fuzz targets).
public enum FastJSON {
    public enum Value: Sendable {
        case string(String)
        case int(Int)
        case bool(Bool)
        case null
        case object([(key: String, value: Value)])
        case array([Value])

        /// The member `key` of an object (nil when absent or not an object).
        public subscript(key: String) -> Value? {
            guard case .object(let members) = self else { return nil }
            return members.first { $0.key == key }?.value
        }

        public var object: [(key: String, value: Value)]? {
            if case .object(let members) = self { return members }
            return nil
        }
    }

    /// The document, or nil when it is outside the subset (or not JSON at all).
    public static func parse(_ data: Data) -> Value? {
        guard data.count <= ContractCoding.maxDocumentBytes else { return nil }
        return data.withUnsafeBytes { bytes -> Value? in
            var reader = Reader(bytes: bytes)
            guard let value = reader.value(depth: 0) else { return nil }
            reader.skipSpace()
            return reader.index == bytes.count ? value : nil
        }
    }

    /// The reader behind ``parse(_:)``; `FastRing.swift` reads a ring with its pieces, in one pass.
    struct Reader {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        mutating func skipSpace() {
            index = JSONBytes.skipWhitespace(bytes, from: index)
        }

        mutating func value(depth: Int) -> Value? {
            guard depth < 8 else { return nil }
            skipSpace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "{"): return object(depth: depth)
            case UInt8(ascii: "["): return array(depth: depth)
            case UInt8(ascii: "\""): return string().map(Value.string)
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "n"): return literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return integer()
            default: return nil
            }
        }

        mutating func object(depth: Int) -> Value? {
            // Its own loop rather than `eachMember`'s: through the closure, a status decoded 5–10 %
            // slower (`callpush-bench steps`, status decoding, 2026-11-27).
            index += 1
            var members: [(key: String, value: Value)] = []
            // An event has up to a dozen members, its caller and device up to four: one allocation
            // each instead of growing 1, 2, 4, 8, 16.
            members.reserveCapacity(depth == 0 ? 16 : 4)
            if closesAtOnce(UInt8(ascii: "}")) { return .object(members) }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = plainString() else { return nil }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
                guard let value = value(depth: depth + 1) else { return nil }
                // Duplicate keys: which one JSONDecoder keeps is its business; leave it to it.
                guard !members.contains(where: { $0.key == key }) else { return nil }
                members.append((key, value))
                guard let more = another(before: UInt8(ascii: "}")) else { return nil }
                if !more { return .object(members) }
            }
        }

        /// The object at `index` (its `{`), member by member: `member` reads each value, with `index`
        /// at its first byte, given the key as the bytes between its quotes: keys as ``plainString()``
        /// reads them. False when the object is not well formed, a key is not plain, or `member`
        /// returned false. (The ring reader's; ``object(depth:)`` keeps its own loop.)
        @inline(__always)
        mutating func eachMember(_ member: (inout Self, UnsafeRawBufferPointer) -> Bool) -> Bool {
            index += 1
            if closesAtOnce(UInt8(ascii: "}")) { return true }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return false }
                index += 1
                let keyStart = index
                guard plainBytes() else { return false }
                let key = UnsafeRawBufferPointer(rebasing: bytes[keyStart..<index - 1])
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                index += 1
                skipSpace()
                guard index < bytes.count, member(&self, key), let more = another(before: UInt8(ascii: "}")) else { return false }
                if !more { return true }
            }
        }

        mutating func array(depth: Int) -> Value? {
            index += 1
            var elements: [Value] = []
            if closesAtOnce(UInt8(ascii: "]")) { return .array(elements) }
            while true {
                guard let element = value(depth: depth + 1) else { return nil }
                elements.append(element)
                guard let more = another(before: UInt8(ascii: "]")) else { return nil }
                if !more { return .array(elements) }
            }
        }

        /// Just inside an object or array: consumes `closing` when the container is empty.
        mutating func closesAtOnce(_ closing: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == closing else { return false }
            index += 1
            return true
        }

        /// After a member or element: true past a `,` (another follows), false past `closing`
        /// (the container ends), nil for anything else.
        mutating func another(before closing: UInt8) -> Bool? {
            skipSpace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                return true
            }
            guard bytes[index] == closing else { return nil }
            index += 1
            return false
        }

        /// A key: printable ASCII without escapes (so equal keys are equal bytes, as the decoders
        /// match them; anything else goes to the decoder).
        mutating func plainString() -> String? {
            index += 1
            return plainRun()
        }

        /// Printable ASCII without escapes from `index` to the closing quote: the text, with
        /// `index` past the quote; nil, with `index` at the first other byte (or the end).
        mutating func plainRun() -> String? {
            let start = index
            guard plainBytes() else { return nil }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index - 1]), as: UTF8.self)
        }

        /// ``plainRun()`` without making the string: true with `index` past the closing quote.
        mutating func plainBytes() -> Bool {
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return true
                }
                guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return false }
                index += 1
            }
            return false
        }

        /// A string value: any escape, any valid UTF-8; nil when it holds a control character
        /// (U+0000–U+001F, U+007F–U+009F: the contract's `generalCategory == .control`), a lone
        /// surrogate or invalid UTF-8.
        mutating func string() -> String? {
            index += 1
            let start = index
            // The common case: printable ASCII up to the closing quote, one copy.
            if let text = plainRun() { return text }
            var text: [UInt8] = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
            text.reserveCapacity(index - start + 32)
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    // Validates the UTF-8 copied raw; escapes were appended as valid UTF-8.
                    guard let string = String(validating: text, as: UTF8.self) else { return nil }
                    // C1 controls (U+0080–U+009F) are 0xC2 0x80...0x9F in UTF-8.
                    for offset in 0..<max(0, text.count - 1) where text[offset] == 0xC2 && text[offset + 1] < 0xA0 {
                        return nil
                    }
                    return string
                case UInt8(ascii: "\\"):
                    index += 1
                    guard index < bytes.count else { return nil }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escape)
                    case UInt8(ascii: "u"):
                        guard let unit = hex4() else { return nil }
                        var scalar = UInt32(unit)
                        if (0xD800...0xDBFF).contains(unit) {
                            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { return nil }
                            index += 2
                            guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                            scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                        }
                        guard let value = Unicode.Scalar(scalar), !(0x00...0x1F).contains(scalar), !(0x7F...0x9F).contains(scalar)
                        else { return nil }
                        text.append(contentsOf: value.utf8)
                    default:
                        // \b \f \n \r \t are control characters; anything else is not JSON.
                        return nil
                    }
                default:
                    guard byte >= 0x20, byte != 0x7F else { return nil }
                    text.append(byte)
                    index += 1
                }
            }
            return nil
        }

        /// Four hex digits of a `\u` escape.
        mutating func hex4() -> UInt16? {
            guard let value = JSONBytes.hex4(bytes, at: index) else { return nil }
            index += 4
            return value
        }

        /// An integer as JSON writes it (no leading zeros, no fraction or exponent), within Int.
        mutating func integer() -> Value? {
            let negative = bytes[index] == UInt8(ascii: "-")
            if negative { index += 1 }
            let start = index
            var magnitude = 0
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(Int(bytes[index] - UInt8(ascii: "0")))
                guard !overflow1, !overflow2 else { return nil }
                magnitude = sum
                index += 1
            }
            let digits = index - start
            guard digits > 0, !(digits > 1 && bytes[start] == UInt8(ascii: "0")) else { return nil }
            if index < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[index]) { return nil }
            return .int(negative ? -magnitude : magnitude)
        }

        mutating func literal(_ word: StaticString, _ value: Value) -> Value? {
            guard JSONBytes.hasLiteral(word, in: bytes, at: index) else { return nil }
            index += word.utf8CodeUnitCount
            return value
        }
    }
}

/// Fast constructors for the contract types from a ``FastJSON`` value: the same rules as their
/// decoders; nil whenever a rule fails or a case is not handled (the decoder then decides).
extension FastJSON.Value {
    /// A string member: absent or `null` → `.some(nil)`, a string → its value, anything else →
    /// nil (not sure).
    public func text(_ key: String) -> String?? {
        switch self[key] {
        case nil, .null?: return .some(nil)
        case .string(let text)?: return .some(text)
        default: return nil
        }
    }

    public func integer(_ key: String) -> Int?? {
        switch self[key] {
        case nil, .null?: return .some(nil)
        case .int(let value)?: return .some(value)
        default: return nil
        }
    }

    public func flag(_ key: String) -> Bool?? {
        switch self[key] {
        case nil, .null?: return .some(nil)
        case .bool(let value)?: return .some(value)
        default: return nil
        }
    }

    /// Every key is one of `known` (the decoders ignore others; so could we, but they are rare).
    public func onlyKeys(_ known: Set<String>) -> Bool {
        object?.allSatisfy { known.contains($0.key) } ?? false
    }

    /// A string-to-string object, `null` or absent → `[:]`.
    public func stringMap(_ key: String) -> [String: String]? {
        switch self[key] {
        case nil, .null?: return [:]
        case .object(let members)?:
            var map: [String: String] = [:]
            for member in members {
                guard case .string(let text) = member.value else { return nil }
                map[member.key] = text
            }
            return map
        default: return nil
        }
    }
}

extension FastJSON {
    /// A string the decoders' `requiredString` / `optionalString` accept (the subset has no
    /// control characters: its strings are printable ASCII).
    static func fits(_ text: String, maxBytes: Int, allowEmpty: Bool = false) -> Bool {
        (allowEmpty || !text.isEmpty) && text.utf8.count <= maxBytes
    }

    /// ``timestamp(_:)``, and for the forms and the half-millisecond edge it leaves to Foundation,
    /// ``ContractCoding/parseTimestamp(_:)`` for that one field — the decoder's own rule, so the
    /// value is the decoder's — instead of sending the whole document to `JSONDecoder`. Nil only
    /// when the text is not a contract timestamp; the caller's slow path then names the field.
    static func contractTimestamp(_ text: String) -> Date? {
        timestamp(text) ?? ContractCoding.parseTimestamp(text)
    }

    /// An RFC 3339 timestamp as ``ContractCoding/parseTimestamp(_:)`` reads it — `Z` or a
    /// `±HH:MM` offset, no fraction or 1 to 9 fractional digits (the contract's own milliseconds,
    /// Python's microseconds, Go's nanoseconds) — rounded to the millisecond, computed without
    /// Foundation. Nil (Foundation's parser decides) for every other form, impossible dates and
    /// times, years outside 1600...9999, offsets beyond ±14:00, and fractions within 2 µs of half
    /// a millisecond (where the parser's binary rounding — a few units in the last place of a
    /// `Double`, ~0.24 µs each today — could go either way).
    static func timestamp(_ text: String) -> Date? {
        var text = text
        return text.withUTF8(timestamp(utf8:))
    }

    /// ``timestamp(_:)`` of the text these bytes hold.
    static func timestamp(utf8: UnsafeBufferPointer<UInt8>) -> Date? {
        let count = utf8.count
        guard count >= 20, count <= 35, utf8[4] == UInt8(ascii: "-"), utf8[7] == UInt8(ascii: "-"), utf8[10] == UInt8(ascii: "T"),
              utf8[13] == UInt8(ascii: ":"), utf8[16] == UInt8(ascii: ":")
        else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for index in range {
                let byte = utf8[index]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
              let minute = number(14..<16), let second = number(17..<19),
              (1600...9999).contains(year), (1...12).contains(month), hour < 24, minute < 60, second < 60
        else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays: Int64 = switch month {
        case 2: leap ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
        guard day >= 1, day <= monthDays else { return nil }
        var index = 19
        var nanos: Int64 = 0
        if utf8[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            var scale: Int64 = 100_000_000
            while index < count, utf8[index] >= UInt8(ascii: "0"), utf8[index] <= UInt8(ascii: "9") {
                guard index - start < 9 else { return nil }
                nanos += Int64(utf8[index] - UInt8(ascii: "0")) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        guard index < count else { return nil }
        var offsetSeconds: Int64 = 0
        if utf8[index] == UInt8(ascii: "Z") {
            index += 1
        } else {
            guard utf8[index] == UInt8(ascii: "+") || utf8[index] == UInt8(ascii: "-"), index + 6 == count,
                  utf8[index + 3] == UInt8(ascii: ":"),
                  let offsetHours = number(index + 1..<index + 3), let offsetMinutes = number(index + 4..<index + 6),
                  offsetMinutes < 60, offsetHours * 60 + offsetMinutes <= 14 * 60
            else { return nil }
            offsetSeconds = (offsetHours * 60 + offsetMinutes) * 60 * (utf8[index] == UInt8(ascii: "+") ? 1 : -1)
            index += 6
        }
        guard index == count else { return nil }
        let belowMillisecond = nanos % 1_000_000
        guard !(498_000...502_000).contains(belowMillisecond) else { return nil }
        let millis = nanos / 1_000_000 + (belowMillisecond > 500_000 ? 1 : 0)
        // Days from civil (H. Hinnant).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let total = ((days * 24 + hour) * 60 + minute) * 60 + second - offsetSeconds
        return Date(timeIntervalSince1970: Double(total * 1000 + millis) / 1000)
    }
}

extension Device {
    static let fastKeys = Set(memberNames.map { "\($0)" })

    public init?(fast value: FastJSON.Value) {
        guard value.onlyKeys(Self.fastKeys), case .string(let token)? = value["token"],
              let environment = value.text("environment"), let platform = value.text("platform"), let id = value.text("id"),
              let device = Device.validated(token: token, environment: environment, platform: platform, id: id)
        else { return nil }
        self = device
    }
}

extension Caller {
    static let fastKeys = Set(memberNames.map { "\($0)" })

    public init?(fast value: FastJSON.Value) {
        guard value.onlyKeys(Self.fastKeys), case .string(let handle)? = value["handle"],
              let typeText = value.text("handleType"), let displayName = value.text("displayName"),
              let caller = Caller.validated(handle: handle, handleType: typeText, displayName: displayName)
        else { return nil }
        self = caller
    }

    /// The caller the decoder reads from these member values (nil for absent or `null`), or nil
    /// when one breaks a rule.
    static func validated(handle: String, handleType typeText: String?, displayName: String?) -> Caller? {
        guard FastJSON.fits(handle, maxBytes: ContractLimits.handleBytes) else { return nil }
        var handleType = HandleType.generic
        if let typeText {
            guard let known = HandleType(rawValue: typeText) else { return nil }
            handleType = known
        }
        if let displayName, !FastJSON.fits(displayName, maxBytes: ContractLimits.displayNameBytes) { return nil }
        return Caller(handle: handle, handleType: handleType, displayName: displayName)
    }
}

extension CallStatus {
    static let fastKeys: Set<String> = ["callId", "deviceId", "deviceKey", "app", "state", "attempt", "replay", "at", "apns", "fcm", "error", "worker", "tenant"]
    static let fastAPNSKeys: Set<String> = ["id", "uniqueId", "status", "reason", "timestamp"]
    static let fastFCMKeys: Set<String> = ["name", "status", "errorCode"]
    static let fastErrorKeys: Set<String> = ["code", "message", "domain"]

    /// A status in the fast subset that passes every rule of the decoder, else nil: what every
    /// dispatch instance's status view reads for each status a worker writes.
    init?(fast value: FastJSON.Value) {
        func bounded(_ text: String??, maxBytes: Int, allowEmpty: Bool = false) -> String?? {
            guard let text else { return nil }
            guard let present = text else { return .some(nil) }
            return FastJSON.fits(present, maxBytes: maxBytes, allowEmpty: allowEmpty) ? .some(present) : nil
        }
        func ranged(_ number: Int??, _ range: ClosedRange<Int>) -> Int?? {
            guard let number else { return nil }
            guard let present = number else { return .some(nil) }
            return range.contains(present) ? .some(present) : nil
        }
        guard value.onlyKeys(Self.fastKeys),
              case .string(let callId)? = value["callId"], FastJSON.fits(callId, maxBytes: ContractLimits.statusCallIDBytes),
              let deviceId = bounded(value.text("deviceId"), maxBytes: ContractLimits.deviceIDBytes),
              let deviceKey = bounded(value.text("deviceKey"), maxBytes: ContractLimits.deviceKeyBytes),
              let app = bounded(value.text("app"), maxBytes: ContractLimits.appNameBytes),
              case .string(let stateText)? = value["state"], let state = State(rawValue: stateText),
              let attempt = ranged(value.integer("attempt"), ContractLimits.attempt),
              let replay = ranged(value.integer("replay"), ContractLimits.replay),
              case .string(let atText)? = value["at"], let at = FastJSON.contractTimestamp(atText),
              let worker = bounded(value.text("worker"), maxBytes: ContractLimits.workerNameBytes, allowEmpty: true),
              let tenant = value.text("tenant"), tenant.map({ TenantName.problem($0) == nil }) ?? true
        else { return nil }
        var apns: APNSDetails?
        switch value["apns"] {
        case nil, .null?: break
        case let details?:
            guard details.onlyKeys(Self.fastAPNSKeys), let id = details.text("id"), let uniqueId = details.text("uniqueId"),
                  let status = details.integer("status"), let reason = details.text("reason"), let timestampText = details.text("timestamp")
            else { return nil }
            var timestamp: Date?
            if let timestampText {
                guard let parsed = FastJSON.contractTimestamp(timestampText) else { return nil }
                timestamp = parsed
            }
            apns = APNSDetails(id: id, uniqueId: uniqueId, status: status, reason: reason, timestamp: timestamp)
        }
        var fcm: FCMDetails?
        switch value["fcm"] {
        case nil, .null?: break
        case let details?:
            guard details.onlyKeys(Self.fastFCMKeys),
                  let name = bounded(details.text("name"), maxBytes: ContractLimits.fcmMessageNameBytes),
                  let status = ranged(details.integer("status"), ContractLimits.httpStatus),
                  let errorCode = bounded(details.text("errorCode"), maxBytes: ContractLimits.fcmErrorCodeBytes)
            else { return nil }
            fcm = FCMDetails(name: name, status: status, errorCode: errorCode)
        }
        var error: ErrorInfo?
        switch value["error"] {
        case nil, .null?: break
        case let details?:
            guard details.onlyKeys(Self.fastErrorKeys), case .string(let code)? = details["code"],
                  let message = details.text("message"), let domain = details.text("domain")
            else { return nil }
            error = ErrorInfo(code: code, message: message, domain: domain)
        }
        self.init(callId: callId, deviceId: deviceId, deviceKey: deviceKey, app: app, state: state, attempt: attempt ?? 0,
                  replay: replay ?? 0, at: at, apns: apns, fcm: fcm, error: error, worker: worker ?? "", tenant: tenant)
    }
}
