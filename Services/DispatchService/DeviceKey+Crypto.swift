import CallContract
import Crypto
import Locking

extension DeviceKey {
    /// ``DeviceKey/make(token:)`` through swift-crypto's SHA-256 (hardware-accelerated), for the
    /// ring path: the contract's portable digest was about 1 % of a ring's CPU.
    /// `DeviceKeyDigestTests` checks the two agree.
    static func fromToken(_ token: String) -> String {
        let digest = SHA256.hash(data: Array(token.lowercased().utf8))
        return digest.withUnsafeBytes { Hex.encode($0.prefix(16)) }
    }
}
