import Foundation

/// A fast reader for the common shape of contract documents, used in front of `JSONDecoder` on
/// the hot paths (every ring a worker takes in, every `POST /v1/calls`).
///
/// It understands only a strict subset of JSON: ASCII strings without escapes (and without
/// DEL), integers without fraction or exponent, `true` / `false` / `null`, objects without
/// duplicate keys, arrays. Anything else — and any document a fast decoder built on it is not
/// sure about — gives `nil`, and the caller decodes with the contract's `JSONDecoder` path, which
/// then also produces the error. So the fast path never decides a refusal, and what it accepts
/// must decode to the same value through the slow path (`FastJSONTests`, the `EventDecoder` and
/// `DispatchRequest` fuzz targets).
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

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
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
            index += 1
            var members: [(key: String, value: Value)] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string() else { return nil }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
                guard let value = value(depth: depth + 1) else { return nil }
                // Duplicate keys: which one JSONDecoder keeps is its business; leave it to it.
                guard !members.contains(where: { $0.key == key }) else { return nil }
                members.append((key, value))
                skipSpace()
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "}") else { return nil }
                index += 1
                return .object(members)
            }
        }

        mutating func array(depth: Int) -> Value? {
            index += 1
            var elements: [Value] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                guard let element = value(depth: depth + 1) else { return nil }
                elements.append(element)
                skipSpace()
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "]") else { return nil }
                index += 1
                return .array(elements)
            }
        }

        /// A string of printable ASCII without escapes.
        mutating func string() -> String? {
            index += 1
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    index += 1
                    return text
                }
                guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
                index += 1
            }
            return nil
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
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { return nil }
            let matches = word.withUTF8Buffer { expected in
                (0..<count).allSatisfy { bytes[index + $0] == expected[$0] }
            }
            guard matches else { return nil }
            index += count
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

    /// A timestamp in exactly the contract's own form (`2026-11-21T12:00:00.000Z`): parsed
    /// directly, then accepted only if formatting it back gives the same text (so impossible
    /// dates and every other RFC 3339 form go to Foundation's parser).
    static func timestamp(_ text: String) -> Date? {
        let utf8 = Array(text.utf8)
        guard utf8.count == 24, utf8[4] == UInt8(ascii: "-"), utf8[7] == UInt8(ascii: "-"), utf8[10] == UInt8(ascii: "T"),
              utf8[13] == UInt8(ascii: ":"), utf8[16] == UInt8(ascii: ":"), utf8[19] == UInt8(ascii: "."), utf8[23] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for index in range {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(utf8[index]) else { return nil }
                value = value * 10 + Int64(utf8[index] - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
              let minute = number(14..<16), let second = number(17..<19), let millis = number(20..<23),
              (1600...9999).contains(year), (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        // Days from civil (H. Hinnant).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let total = ((days * 24 + hour) * 60 + minute) * 60 + second
        let date = Date(timeIntervalSince1970: Double(total * 1000 + millis) / 1000)
        var check: [UInt8] = []
        ContractCoding.appendTimestamp(date, to: &check)
        return check == utf8 ? date : nil
    }
}

extension Device {
    static let fastKeys: Set<String> = ["token", "environment", "id", "platform"]

    public init?(fast value: FastJSON.Value) {
        guard value.onlyKeys(Self.fastKeys), case .string(let token)? = value["token"],
              let environment = value.text("environment"), let platform = value.text("platform"), let id = value.text("id"),
              let device = Device.validated(token: token, environment: environment, platform: platform, id: id)
        else { return nil }
        self = device
    }
}

extension Caller {
    static let fastKeys: Set<String> = ["handle", "handleType", "displayName"]

    public init?(fast value: FastJSON.Value) {
        guard value.onlyKeys(Self.fastKeys),
              case .string(let handle)? = value["handle"], FastJSON.fits(handle, maxBytes: 256),
              let typeText = value.text("handleType"), let displayName = value.text("displayName")
        else { return nil }
        var handleType = HandleType.generic
        if let typeText {
            guard let known = HandleType(rawValue: typeText) else { return nil }
            handleType = known
        }
        if let displayName, !FastJSON.fits(displayName, maxBytes: 256) { return nil }
        self.init(handle: handle, handleType: handleType, displayName: displayName)
    }
}

extension RingRequest {
    static let fastKeys: Set<String> = [
        "type", "callId", "app", "device", "caller", "hasVideo", "requestedAt", "ringDeadline", "maxDurationSeconds", "attributes", "replay", "tenant",
    ]

    /// A `ring` event in the fast subset that passes every rule of the decoder, else nil.
    public init?(fast value: FastJSON.Value) {
        guard value.onlyKeys(Self.fastKeys), case .string("ring")? = value["type"],
              case .string(let callId)? = value["callId"], CallID.normalize(callId) == callId,
              case .string(let app)? = value["app"],
              let deviceValue = value["device"], let device = Device(fast: deviceValue),
              let callerValue = value["caller"], let caller = Caller(fast: callerValue),
              let hasVideo = value.flag("hasVideo"),
              case .string(let requestedText)? = value["requestedAt"], let requestedAt = FastJSON.timestamp(requestedText),
              case .string(let deadlineText)? = value["ringDeadline"], let ringDeadline = FastJSON.timestamp(deadlineText),
              let maxDuration = value.integer("maxDurationSeconds"), let replay = value.integer("replay"),
              let attributes = value.stringMap("attributes"), let tenant = value.text("tenant")
        else { return nil }
        self.init(callId: callId, app: app, device: device, caller: caller, hasVideo: hasVideo ?? false,
                  requestedAt: requestedAt, ringDeadline: ringDeadline, maxDurationSeconds: maxDuration,
                  attributes: attributes, replay: replay ?? 0, tenant: tenant)
        guard (try? validate()) != nil else { return nil }
    }
}
