/// Default topic names and the dead-letter headers of the contract.
public enum Topics {
    /// `ring` / `cancel` events, keyed by callId.
    public static let requests = "voip.call-requests"
    /// Status events, keyed by callId, co-partitioned with requests.
    public static let status = "voip.call-status"
    /// Dead-lettered requests: the original bytes, with `DeadLetterHeader`s saying why.
    public static let deadLetter = "voip.call-requests.dlq"
}

/// Header names on `voip.call-requests.dlq` records.
public enum DeadLetterHeader {
    /// Machine code (`malformed-json`, `missing-field`, `Unregistered`, …).
    public static let error = "callpush-error"
    /// Human-readable reason (`device.token: not hexadecimal`).
    public static let reason = "callpush-reason"
    /// Number of push attempts made.
    public static let attempts = "callpush-attempts"
    public static let originalPartition = "callpush-original-partition"
    public static let originalOffset = "callpush-original-offset"
    /// RFC 3339 instant of the failure.
    public static let failedAt = "callpush-failed-at"
    /// Present only when the record holds a prefix of the original request: the original's size in
    /// bytes (it was too large for the DLQ topic; the original stays at its partition and offset).
    public static let originalBytes = "callpush-original-bytes"

    public static let all = [error, reason, attempts, originalPartition, originalOffset, failedAt]
}
