import Foundation

/// Request limits of the API (documented in docs/dispatch.md).
public struct DispatchLimits: Sendable, Hashable {
    /// Most devices one `POST /v1/calls` may ring. Default 10.
    public var maxDevices = 10
    /// Ring timeout when the request gives none. Default 30 s.
    public var defaultRingTimeoutSeconds = 30
    /// Allowed ring timeouts. Default 1…120 s.
    public var ringTimeoutSeconds: ClosedRange<Int> = 1...120
    /// Largest request body; larger bodies get 413. Default 64 KiB.
    public var maxBodyBytes = 64 * 1024
    /// Largest ack body (a real one is under 400 bytes); larger bodies get 413. Default 2 KiB.
    public var ackMaxBodyBytes = 2 * 1024

    /// The defaults above.
    public init() {}
}
