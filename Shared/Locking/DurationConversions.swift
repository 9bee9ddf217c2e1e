extension Duration {
    /// The duration in (fractional) seconds, e.g. for `Date` arithmetic and `TimeInterval` APIs.
    ///
    /// Named `inSeconds` rather than `seconds` so that it cannot clash with a module's own
    /// conversion of that name.
    @inlinable
    public var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Whole milliseconds, rounded toward zero (librdkafka's `*.ms` settings, log figures).
    @inlinable
    public var inWholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
