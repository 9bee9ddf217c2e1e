/// Random small edits of a document, for the tests that hold a fast reader to the slow path it
/// stands in front of (whatever the fast reader accepts, the slow one must read the same).
public enum ByteMutation {
    /// One to three edits of `bytes` (none once it is empty): a byte removed, or a byte of
    /// `alphabet` inserted or written over one.
    public static func mutate(_ bytes: inout [UInt8], alphabet: [UInt8], using generator: inout some RandomNumberGenerator) {
        for _ in 0..<Int.random(in: 1...3, using: &generator) where !bytes.isEmpty {
            let at = Int.random(in: 0..<bytes.count, using: &generator)
            switch Int.random(in: 0...2, using: &generator) {
            case 0: bytes.remove(at: at)
            case 1: bytes.insert(alphabet.randomElement(using: &generator)!, at: at)
            default: bytes[at] = alphabet.randomElement(using: &generator)!
            }
        }
    }
}
