import Foundation
#if canImport(JSONBytes)
import JSONBytes
#endif

/// The worker's fast ring decoder: a `ring` event read in one pass over its bytes, with
/// ``FastJSON``'s readers and subset, straight into the event's fields — no tree of values, no
/// key strings, no lookups by key. It accepts exactly the documents that ``FastJSON/parse(_:)``
/// would read into a ring passing every rule (each member once, only the contract's members, the
/// same value types, `null` where the decoder takes it for absent), and gives nil for everything
/// else, which ``CallRequest/decode(_:)`` then hands to `JSONDecoder`. So it never decides a
/// refusal, and what it accepts decodes to the same value through the slow path
/// (`FastJSONTests`, the `EventDecoder` fuzz target).
extension RingRequest {
    static func fast(_ data: Data) -> RingRequest? {
        data.withUnsafeBytes { fast(bytes: $0) }
    }

    static func fast(bytes: UnsafeRawBufferPointer) -> RingRequest? {
        guard bytes.count <= ContractCoding.maxDocumentBytes else { return nil }
        var reader = FastJSON.Reader(bytes: bytes)
        reader.skipSpace()
        guard let ring = reader.ring() else { return nil }
        reader.skipSpace()
        return reader.index == bytes.count ? ring : nil
    }

    /// The event's members, in the order of the bits ``FastJSON/Reader/members(_:_:)`` sets.
    fileprivate static let memberNames: [StaticString] = [
        "type", "callId", "app", "device", "caller", "hasVideo", "requestedAt", "ringDeadline", "maxDurationSeconds",
        "attributes", "replay", "tenant",
    ]
    /// `type`, `callId`, `app`, `device`, `caller`, `requestedAt`, `ringDeadline`.
    fileprivate static let requiredMembers: UInt32 = 0b1101_1111
}

extension Device {
    /// Its members, as the ring reader matches them (and ``fastKeys`` holds them for the value tree).
    static let memberNames: [StaticString] = ["token", "environment", "id", "platform"]
}

extension Caller {
    /// Its members, as the ring reader matches them (and ``fastKeys`` holds them for the value tree).
    static let memberNames: [StaticString] = ["handle", "handleType", "displayName"]
}

extension FastJSON.Reader {
    fileprivate mutating func ring() -> RingRequest? {
        var callId: String?, app: String?, device: Device?, caller: Caller?, hasVideo: Bool?
        var requestedAt: Date?, ringDeadline: Date?, maxDuration: Int?, attributes: [String: String] = [:]
        var replay: Int?, tenant: String?
        let seen = members(RingRequest.memberNames) { reader, member in
            switch member {
            case 0: return reader.stringValue() == "ring"
            case 1: return reader.read(&callId) { $0.stringValue() }
            case 2: return reader.read(&app) { $0.stringValue() }
            case 3: return reader.read(&device) { $0.device() }
            case 4: return reader.read(&caller) { $0.caller() }
            case 5: return reader.optional(&hasVideo) { $0.bool() }
            case 6: return reader.read(&requestedAt) { $0.timestamp() }
            case 7: return reader.read(&ringDeadline) { $0.timestamp() }
            case 8: return reader.optional(&maxDuration) { $0.int() }
            case 9: return reader.stringMap(&attributes)
            case 10: return reader.optional(&replay) { $0.int() }
            default: return reader.optional(&tenant) { $0.stringValue() }
            }
        }
        guard let seen, seen & RingRequest.requiredMembers == RingRequest.requiredMembers, let callId, let app, let device,
              let caller, let requestedAt, let ringDeadline
        else { return nil }
        let ring = RingRequest(callId: callId, app: app, device: device, caller: caller, hasVideo: hasVideo ?? false,
                               requestedAt: requestedAt, ringDeadline: ringDeadline, maxDurationSeconds: maxDuration,
                               attributes: attributes, replay: replay ?? 0, tenant: tenant)
        guard (try? ring.validate()) != nil else { return nil }
        return ring
    }

    private mutating func device() -> Device? {
        var token: String?, environment: String?, id: String?, platform: String?
        let seen = members(Device.memberNames) { reader, member in
            switch member {
            case 0: return reader.read(&token) { $0.stringValue() }
            case 1: return reader.optional(&environment) { $0.stringValue() }
            case 2: return reader.optional(&id) { $0.stringValue() }
            default: return reader.optional(&platform) { $0.stringValue() }
            }
        }
        guard seen != nil, let token else { return nil }
        return Device.validated(token: token, environment: environment, platform: platform, id: id)
    }

    private mutating func caller() -> Caller? {
        var handle: String?, handleType: String?, displayName: String?
        let seen = members(Caller.memberNames) { reader, member in
            switch member {
            case 0: return reader.read(&handle) { $0.stringValue() }
            case 1: return reader.optional(&handleType) { $0.stringValue() }
            default: return reader.optional(&displayName) { $0.stringValue() }
            }
        }
        guard seen != nil, let handle else { return nil }
        return Caller.validated(handle: handle, handleType: handleType, displayName: displayName)
    }

    /// An object whose keys are all among `names`, each at most once: `read` takes each member's
    /// value (its first byte at `index`) by the key's position in `names`. The bits of the members
    /// seen, or nil when the object is not such an object or `read` returned false.
    private mutating func members(_ names: [StaticString], _ read: (inout Self, Int) -> Bool) -> UInt32? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return nil }
        var seen: UInt32 = 0
        let complete = eachMember { reader, key in
            guard let member = names.firstIndex(where: { Self.equal(key, $0) }), seen & (1 << member) == 0 else { return false }
            seen |= 1 << member
            return read(&reader, member)
        }
        return complete ? seen : nil
    }

    private static func equal(_ key: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        key.count == name.utf8CodeUnitCount && memcmp(key.baseAddress!, name.utf8Start, key.count) == 0
    }

    /// A member that must have a value: `value` reads it into `slot`; false when it cannot.
    private mutating func read<T>(_ slot: inout T?, _ value: (inout Self) -> T?) -> Bool {
        slot = value(&self)
        return slot != nil
    }

    /// A member that may be `null` (as if absent): otherwise `value` reads it into `slot`.
    private mutating func optional<T>(_ slot: inout T?, _ value: (inout Self) -> T?) -> Bool {
        if bytes[index] == UInt8(ascii: "n") { return literal("null", .null) != nil }
        return read(&slot, value)
    }

    private mutating func stringValue() -> String? {
        guard bytes[index] == UInt8(ascii: "\"") else { return nil }
        return string()
    }

    private mutating func bool() -> Bool? {
        if bytes[index] == UInt8(ascii: "t"), literal("true", .bool(true)) != nil { return true }
        if bytes[index] == UInt8(ascii: "f"), literal("false", .bool(false)) != nil { return false }
        return nil
    }

    private mutating func int() -> Int? {
        guard bytes[index] == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]),
              case .int(let value)? = integer()
        else { return nil }
        return value
    }

    /// A timestamp string as ``FastJSON/contractTimestamp(_:)`` reads it. One without escapes is read
    /// where it lies, without making a string of it first.
    private mutating func timestamp() -> Date? {
        guard bytes[index] == UInt8(ascii: "\"") else { return nil }
        let quote = index
        index += 1
        if plainBytes(),
           let date = FastJSON.timestamp(utf8: UnsafeRawBufferPointer(rebasing: bytes[quote + 1..<index - 1]).assumingMemoryBound(to: UInt8.self)) {
            return date
        }
        index = quote
        return string().flatMap(FastJSON.contractTimestamp)
    }

    /// `attributes`: `null`, or an object of strings (keys as ``FastJSON/Reader/eachMember(_:)`` takes them), each key once.
    private mutating func stringMap(_ map: inout [String: String]) -> Bool {
        if bytes[index] == UInt8(ascii: "n") { return literal("null", .null) != nil }
        guard bytes[index] == UInt8(ascii: "{") else { return false }
        return eachMember { reader, key in
            guard let value = reader.stringValue() else { return false }
            return map.updateValue(value, forKey: String(decoding: key, as: UTF8.self)) == nil
        }
    }
}
