import Foundation
#if canImport(JSONBytes)
// The fuzz build (scripts/fuzz) compiles this module's sources with JSONBytes's as one module.
import JSONBytes
#endif

/// The fields of a ``CallStatus`` a dedupe rebuild needs — `callId`, `deviceKey`, `replay`,
/// `state`, `at`, and `tenant` (a cancel applies to its tenant's rings) — decoded without building
/// a `CallStatus`.
///
/// ``init(json:)`` scans the document once: it reads the five fields (with the same rules as
/// ``CallStatus``'s decoder) and steps over every other member, checking only that it is
/// well-formed JSON. Anything outside the scanner's subset (non-ASCII bytes, an escaped key or
/// field, a timestamp not in the contract's own form, a field present twice) goes to a `Codable`
/// path that decodes the same five fields with `JSONDecoder`. The other fields are not validated:
/// a status a worker wrote is trusted for what it says about the delivery.
public struct StatusDigest: Sendable, Hashable {
    public var callId: String
    public var deviceKey: String?
    public var replay: Int
    public var state: CallStatus.State
    public var at: Date
    public var tenant: String?

    /// `callId` and `deviceKey` bounds, as ``CallStatus``'s decoder has them.
    static let callIdBytes = 64
    static let deviceKeyBytes = 64

    public init(callId: String, deviceKey: String?, replay: Int, state: CallStatus.State, at: Date, tenant: String? = nil) {
        self.callId = callId
        self.deviceKey = deviceKey
        self.replay = replay
        self.state = state
        self.at = at
        self.tenant = tenant
    }

    /// The key the worker remembers a call-level cancel under (``CallRequest/cancelScope(callId:tenant:)``).
    public var cancelScope: String { CallRequest.cancelScope(callId: callId, tenant: tenant) }

    /// The digest of a status document, or nil when the document is not JSON or its five fields
    /// break the contract's rules.
    public init?(json bytes: [UInt8]) {
        guard bytes.count <= ContractCoding.maxDocumentBytes else { return nil }
        if let fast = bytes.withUnsafeBytes({ StatusDigest(fast: $0) }) {
            self = fast
        } else if let slow = StatusDigest(decoding: bytes) {
            self = slow
        } else {
            return nil
        }
    }

    /// The fast path alone (nil: not sure; the `Codable` path decides).
    init?(fast bytes: UnsafeRawBufferPointer) {
        var scanner = StatusScanner(bytes: bytes)
        guard let digest = scanner.digest() else { return nil }
        self = digest
    }

    /// The `Codable` path alone.
    init?(decoding bytes: [UInt8]) {
        guard let fields = try? ContractCoding.decode(Fields.self, from: Data(bytes)) else { return nil }
        self.init(callId: fields.callId, deviceKey: fields.deviceKey, replay: fields.replay, state: fields.state, at: fields.at,
                  tenant: fields.tenant)
    }

    /// The digest's fields with ``CallStatus``'s rules.
    private struct Fields: Decodable {
        var callId: String
        var deviceKey: String?
        var replay: Int
        var state: CallStatus.State
        var at: Date
        var tenant: String?

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CallStatus.CodingKeys.self)
            callId = try c.requiredString(.callId, maxBytes: StatusDigest.callIdBytes)
            deviceKey = try c.optionalString(.deviceKey, maxBytes: StatusDigest.deviceKeyBytes)
            replay = try c.optionalInt(.replay, in: ContractLimits.replay) ?? 0
            state = try c.requiredEnum(CallStatus.State.self, .state)
            at = try c.requiredTimestamp(.at)
            tenant = try c.optionalTenant(.tenant)
        }
    }
}

/// One pass over a status document: the five fields, every other member stepped over.
private struct StatusScanner {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    private enum Field {
        case callId, deviceKey, replay, state, at, tenant

        /// Matches a key's bytes without making a `String` of it.
        static func named(_ key: UnsafeRawBufferPointer) -> Field? {
            func equals(_ name: StaticString) -> Bool {
                name.withUTF8Buffer { $0.count == key.count && $0.elementsEqual(key) }
            }
            switch key.count {
            case 2: return equals("at") ? .at : nil
            case 5: return equals("state") ? .state : nil
            case 6: return equals("callId") ? .callId : (equals("replay") ? .replay : (equals("tenant") ? .tenant : nil))
            case 9: return equals("deviceKey") ? .deviceKey : nil
            default: return nil
            }
        }
    }

    mutating func digest() -> StatusDigest? {
        var callId: String?
        var deviceKey: String??
        var replay: Int??
        var state: CallStatus.State?
        var at: Date?
        var tenant: String??
        skipSpace()
        guard take(UInt8(ascii: "{")) else { return nil }
        skipSpace()
        if !take(UInt8(ascii: "}")) {
            while true {
                skipSpace()
                guard let key = plainString() else { return nil }
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                switch Field.named(key) {
                case .callId:
                    guard callId == nil, let text = plainText(), FastJSON.fits(text, maxBytes: StatusDigest.callIdBytes) else { return nil }
                    callId = text
                case .deviceKey:
                    guard nullable(&deviceKey, { $0.plainText() }, valid: { FastJSON.fits($0, maxBytes: StatusDigest.deviceKeyBytes) }) else {
                        return nil
                    }
                case .replay:
                    guard nullable(&replay, { $0.integer() }, valid: { ContractLimits.replay.contains($0) }) else { return nil }
                case .state:
                    guard state == nil, let text = plainText(), let value = CallStatus.State(rawValue: text) else { return nil }
                    state = value
                case .at:
                    guard at == nil, let text = plainText(), let value = FastJSON.timestamp(text) else { return nil }
                    at = value
                case .tenant:
                    guard nullable(&tenant, { $0.plainText() }, valid: { TenantName.problem($0) == nil }) else { return nil }
                case nil:
                    guard skipValue(depth: 1) else { return nil }
                }
                skipSpace()
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                break
            }
        }
        skipSpace()
        guard index == bytes.count, let callId, let state, let at else { return nil }
        return StatusDigest(callId: callId, deviceKey: deviceKey ?? nil, replay: (replay ?? nil) ?? 0, state: state, at: at,
                            tenant: tenant ?? nil)
    }

    // MARK: reading

    /// Reads a field that may be `null` into `field` (`.some(nil)` for `null`): false when the
    /// field was already read, or its value is unreadable or not `valid`.
    private mutating func nullable<Value>(_ field: inout Value??, _ read: (inout Self) -> Value?,
                                          valid: (Value) -> Bool) -> Bool {
        guard field == nil else { return false }
        if takeLiteral("null") {
            field = .some(nil)
            return true
        }
        guard let value = read(&self), valid(value) else { return false }
        field = .some(value)
        return true
    }

    private mutating func skipSpace() {
        index = JSONBytes.skipWhitespace(bytes, from: index)
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func takeLiteral(_ word: StaticString) -> Bool {
        guard JSONBytes.hasLiteral(word, in: bytes, at: index) else { return false }
        index += word.utf8CodeUnitCount
        return true
    }

    /// A string of printable ASCII without escapes, as the bytes between its quotes.
    private mutating func plainString() -> UnsafeRawBufferPointer? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return UnsafeRawBufferPointer(rebasing: bytes[start..<index - 1])
            }
            guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
            index += 1
        }
        return nil
    }

    /// A non-empty ``plainString()`` as text.
    private mutating func plainText() -> String? {
        guard let raw = plainString(), !raw.isEmpty else { return nil }
        return String(decoding: raw, as: UTF8.self)
    }

    /// An integer as JSON writes it (no fraction or exponent), within `Int`.
    private mutating func integer() -> Int? {
        let start = index
        guard skipNumber() else { return nil }
        let number = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        guard !number.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) else { return nil }
        return Int(String(decoding: number, as: UTF8.self))
    }

    // MARK: stepping over

    /// Steps over one well-formed JSON value (ASCII only; nil-free: `false` when unsure).
    private mutating func skipValue(depth: Int) -> Bool {
        guard depth <= 16, index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "\""): return skipString()
        case UInt8(ascii: "{"): return skipContainer(close: UInt8(ascii: "}"), members: true, depth: depth)
        case UInt8(ascii: "["): return skipContainer(close: UInt8(ascii: "]"), members: false, depth: depth)
        case UInt8(ascii: "t"): return takeLiteral("true")
        case UInt8(ascii: "f"): return takeLiteral("false")
        case UInt8(ascii: "n"): return takeLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return skipNumber()
        default: return false
        }
    }

    private mutating func skipContainer(close: UInt8, members: Bool, depth: Int) -> Bool {
        index += 1
        skipSpace()
        if take(close) { return true }
        while true {
            skipSpace()
            if members {
                guard skipString() else { return false }
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return false }
                skipSpace()
            }
            guard skipValue(depth: depth + 1) else { return false }
            skipSpace()
            if take(UInt8(ascii: ",")) { continue }
            return take(close)
        }
    }

    /// A string with JSON escapes, printable ASCII otherwise.
    private mutating func skipString() -> Bool {
        guard take(UInt8(ascii: "\"")) else { return false }
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return true
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { return false }
                let escaped = bytes[index]
                index += 1
                if JSONBytes.isShortEscape(escaped) { continue }
                // \uXXXX: surrogate pairs are the decoder's to judge; leave any to it.
                guard escaped == UInt8(ascii: "u"), let code = JSONBytes.hex4(bytes, at: index), !(0xD800...0xDFFF).contains(code)
                else { return false }
                index += 4
            default:
                guard byte >= 0x20, byte < 0x7F else { return false }
            }
        }
        return false
    }

    /// A JSON number (fraction and exponent allowed).
    private mutating func skipNumber() -> Bool {
        guard let end = JSONBytes.numberEnd(bytes, from: index) else { return false }
        index = end
        return true
    }
}
