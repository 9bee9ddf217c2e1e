/// Random (version 4) UUIDs as lower-case text, for the `apns-id` and `apns-unique-id` the
/// simulator makes up. Foundation's `UUID()` opens and reads `/dev/urandom` on every call on
/// Linux (an `openat` per answered push, visible in the simulator's profile under h2load);
/// `SystemRandomNumberGenerator` is one `getrandom` call, and a connection's ``FastRandom`` none.
enum RandomUUID {
    private static let digits = Array("0123456789abcdef".utf8)

    static func string() -> String {
        var generator = SystemRandomNumberGenerator()
        return string(using: &generator)
    }

    static func string<G: RandomNumberGenerator>(using generator: inout G) -> String {
        var high = generator.next() as UInt64
        var low = generator.next() as UInt64
        high = (high & ~0xF000) | 0x4000  // version 4
        low = (low & ~(0xC000 << 48)) | (0x8000 << 48)  // RFC 4122 variant
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var index = 0
            func put(_ value: UInt64, nibbles: Int) {
                for shift in stride(from: (nibbles - 1) * 4, through: 0, by: -4) {
                    buffer[index] = digits[Int(value >> UInt64(shift) & 0xF)]
                    index += 1
                }
            }
            func dash() {
                buffer[index] = UInt8(ascii: "-")
                index += 1
            }
            put(high >> 32, nibbles: 8)
            dash()
            put(high >> 16 & 0xFFFF, nibbles: 4)
            dash()
            put(high & 0xFFFF, nibbles: 4)
            dash()
            put(low >> 48, nibbles: 4)
            dash()
            put(low & 0xFFFF_FFFF_FFFF, nibbles: 12)
            return index
        }
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
