/// wyrand (Wang Yi's 64-bit generator): fast, statistically good, not cryptographic. Each simulator connection
/// seeds one from the system generator for the ids it makes up (`UUID.randomVersion4(using:)`: Foundation's
/// `UUID()` opens and reads `/dev/urandom` on every call on Linux) and its fault sampling (two `getrandom`
/// calls per answered push showed in the simulator's profile under h2load).
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
