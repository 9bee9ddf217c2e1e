// The fuzz build's stand-in for Shared/CallContract/DeviceKey.swift, whose SHA-256 is swift-crypto's
// and which the one swiftc call of scripts/fuzz does not build. What the targets check (a payload's
// size, its decoding back to the ring) depends only on the key's form, which every real key shares:
// 32 lower-case hex digits.
enum DeviceKey {
    static func make(token: String) -> String { String(repeating: "0", count: 32) }
}
