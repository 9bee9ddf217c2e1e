import Locking

/// Random (version 4) UUIDs as lower-case text, for the `apns-id` and `apns-unique-id` the
/// simulator makes up. Foundation's `UUID()` opens and reads `/dev/urandom` on every call on
/// Linux (an `openat` per answered push, visible in the simulator's profile under h2load);
/// `SystemRandomNumberGenerator` is one `getrandom` call, and a connection's ``FastRandom`` none.
enum RandomUUID {

    static func string() -> String {
        var generator = SystemRandomNumberGenerator()
        return string(using: &generator)
    }

    static func string<G: RandomNumberGenerator>(using generator: inout G) -> String {
        var high = generator.next() as UInt64
        var low = generator.next() as UInt64
        high = (high & ~0xF000) | 0x4000  // version 4
        low = (low & ~(0xC000 << 48)) | (0x8000 << 48)  // RFC 4122 variant
        return withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { Hex.uuidText($0) }
    }
}

/// wyrand (Wang Yi's 64-bit generator): fast, statistically good, not cryptographic. Each simulator connection
/// seeds one from the system generator for the ids it makes up and its fault sampling (two `getrandom` calls
/// per answered push showed in the simulator's profile under h2load).
struct FastRandom: RandomNumberGenerator {
    private var state: UInt64

    init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    mutating func next() -> UInt64 {
        state &+= 0xa076_1d64_78bd_642f
        let product = (state ^ 0xe703_7ed1_a0b4_28db).multipliedFullWidth(by: state)
        return product.high ^ product.low
    }
}
