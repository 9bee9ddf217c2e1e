extension String {
    /// `lowercased()`, without its new string when there is nothing to lower: ids and hex tokens
    /// arrive in lower case almost always, and `lowercased()` allocates every time. Any byte that
    /// is not ASCII goes to `lowercased()` too, so the result is always `lowercased()`'s.
    @inlinable
    public func lowercasedIfNeeded() -> String {
        let clean = utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            var found: UInt8 = 0
            for byte in bytes { found |= (byte >= 0x80 || byte &- UInt8(ascii: "A") < 26) ? 1 : 0 }
            return found == 0
        } ?? !utf8.contains { $0 >= 0x80 || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
        return clean ? self : lowercased()
    }
}
