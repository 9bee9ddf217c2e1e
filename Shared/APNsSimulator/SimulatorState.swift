import Foundation

/// The shared mutable state of a simulator: faults, records, stats and provider-token bookkeeping.
/// A value type kept behind a `Mutex` in ``SimulatorCore``; methods return what the caller must do.
struct SimulatorState {
    /// The provider token currently in use for one signing key.
    struct KeyTokenState {
        var currentIssuedAt: Int64
        var acceptedAt: Date
        var previousIssuedAt: Int64?
    }

    var faults: APNSSimulatorFaults
    var pushes: RingBuffer<StoredPush>
    var stats = APNSSimulatorStats()
    var keyTokens: [String: KeyTokenState] = [:]
    var nextConnectionID = 1
    var connections: [Int: ConnectionHandle] = [:]
    var stopped = false

    init(faults: APNSSimulatorFaults, maxRecordedPushes: Int) {
        self.faults = faults.normalized
        self.pushes = RingBuffer(capacity: maxRecordedPushes)
    }

    /// APNs refuses a new token (different `iat`) for a key on a connection within 20 minutes of
    /// that connection's previous update; the current and the previous token stay usable. Tracked per
    /// connection, so several provider processes sharing one key — each with its own token, as
    /// horizontally scaled workers have — are accepted, as APNs accepts them.
    mutating func checkTokenUpdate(_ token: ProviderToken, connection: Int, now: Date) -> APNSReason? {
        let key = "\(connection)/\(token.keyID)"
        guard var state = keyTokens[key] else {
            keyTokens[key] = KeyTokenState(currentIssuedAt: token.issuedAt, acceptedAt: now)
            return nil
        }
        if token.issuedAt == state.currentIssuedAt || token.issuedAt == state.previousIssuedAt { return nil }
        if now.timeIntervalSince(state.acceptedAt) < 20 * 60 { return .tooManyProviderTokenUpdates }
        state.previousIssuedAt = state.currentIssuedAt
        state.currentIssuedAt = token.issuedAt
        state.acceptedAt = now
        keyTokens[key] = state
        return nil
    }

    mutating func record(_ push: StoredPush) {
        stats.accepted += 1
        if pushes.append(push) { stats.recordsDropped += 1 }
    }

    mutating func reject(_ reason: String) {
        stats.rejected[reason, default: 0] += 1
    }

    mutating func openConnection(_ makeHandle: (Int) -> ConnectionHandle) -> ConnectionHandle? {
        guard !stopped else { return nil }
        let id = nextConnectionID
        nextConnectionID += 1
        let handle = makeHandle(id)
        connections[id] = handle
        stats.connectionsOpened += 1
        stats.connectionsOpen = connections.count
        return handle
    }

    mutating func closeConnection(_ id: Int) {
        connections[id] = nil
        keyTokens = keyTokens.filter { !$0.key.hasPrefix("\(id)/") }
        stats.connectionsOpen = connections.count
    }

    var currentStats: APNSSimulatorStats {
        var copy = stats
        copy.recorded = pushes.count
        copy.connectionsOpen = connections.count
        return copy
    }
}
