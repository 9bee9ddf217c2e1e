/// Every size and range limit of the contract, in one place: the `Codable` decoders and the fast
/// decoding path (``FastJSON``) read them from here. Sizes are UTF-8 bytes.
public enum ContractLimits {
    // Events
    /// `type` of a call event.
    public static let eventTypeBytes = 32
    /// A call id: a UUID in canonical 8-4-4-4-12 form.
    public static let callIDBytes = 36
    /// A call id as a status carries it (written by callpush, read leniently).
    public static let statusCallIDBytes = 64
    /// An enumeration value's text.
    public static let enumValueBytes = 64
    public static let appNameBytes = 64
    public static let tenantNameBytes = 64
    public static let attributeCount = 32
    public static let attributeKeyBytes = 64
    public static let attributeValueBytes = 1024
    public static let maxDurationSeconds = 1...86_400
    public static let replay = 0...1_000
    /// An RFC 3339 timestamp's text.
    public static let timestampBytes = 64
    /// A cancel's free-text reason.
    public static let cancelReasonBytes = 256

    // Devices and callers
    public static let deviceTokenBytes = 256
    public static let deviceIDBytes = 128
    public static let deviceKeyBytes = 64
    public static let ackTokenBytes = 128
    public static let handleBytes = 256
    public static let displayNameBytes = 256

    // Statuses
    public static let attempt = 0...1_000_000
    public static let workerNameBytes = 256
    public static let httpStatus = 0...999
    /// FCM's message name, `projects/<project>/messages/<id>`.
    public static let fcmMessageNameBytes = 512
    public static let fcmErrorCodeBytes = 128

    // Device acknowledgements
    /// `error.code` and `error.domain`: 1–64 / 1–128 bytes of ASCII letters, digits, '.', '-', '_'.
    public static let errorCodeBytes = 64
    public static let errorDomainBytes = 128
    /// `error.message`: at most 256 bytes, no control or format (bidi, zero-width) characters.
    public static let errorMessageBytes = 256
}
