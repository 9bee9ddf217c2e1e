import Foundation

extension UUID {
    /// A random (version 4, RFC 4122) UUID from one `getrandom` call. Foundation's `UUID()` opens and
    /// reads `/dev/urandom` on every call on Linux (three system calls and a path lookup): the APNs
    /// client's default `apns-id` and dispatch's call ids are made per request.
    public static func randomVersion4() -> UUID {
        var generator = SystemRandomNumberGenerator()
        return randomVersion4(using: &generator)
    }

    /// A random (version 4, RFC 4122) UUID from `generator`'s bits: the APNs simulator draws the
    /// ids it makes up from a per-connection generator, without a system call per push.
    public static func randomVersion4<G: RandomNumberGenerator>(using generator: inout G) -> UUID {
        var bytes = (generator.next() as UInt64, generator.next() as UInt64)
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = raw[6] & 0x0F | 0x40  // version 4
            raw[8] = raw[8] & 0x3F | 0x80  // RFC 4122 variant
            return UUID(uuid: raw.load(as: uuid_t.self))
        }
    }
}

extension UUID {
    /// The UUID as lower-case text (8-4-4-4-12 digits): the canonical call id, and the `apns-id`
    /// as APNs echoes it. Foundation's `uuidString` is upper-case and formats with `snprintf`.
    public var lowercasedText: String {
        withUnsafeBytes(of: uuid) { Hex.uuidText($0) }
    }
}
