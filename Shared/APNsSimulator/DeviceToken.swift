/// Helpers for device tokens (hex strings).
enum DeviceToken {
    /// APNs tokens are hex; today 64 characters, historically longer ones exist. Shorter than 64 or odd
    /// lengths are rejected, as is anything above 200 characters.
    static func isValid(_ token: some StringProtocol) -> Bool {
        let utf8 = token.utf8
        guard utf8.count >= 64, utf8.count <= 200, utf8.count % 2 == 0 else { return false }
        return utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66) || (byte >= 0x41 && byte <= 0x46)
        }
    }

    /// A short prefix safe for logs.
    static func redacted(_ token: some StringProtocol) -> String {
        String(token.prefix(8)) + "…"
    }
}
