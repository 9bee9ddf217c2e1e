import CallContract

extension CancelSignals {
    /// Whether `ring` is cancelled: by a cancel of its own tenant (two tenants may use one call
    /// id), or by a cancel without a tenant (producers that predate tenants cancel every ring).
    public func isCancelled(_ ring: RingRequest) -> Bool {
        isCancelled(ring.cancelScope) || (ring.tenant != nil && isCancelled(ring.callId))
    }
}
