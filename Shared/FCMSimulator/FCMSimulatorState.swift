import Foundation

/// The shared mutable state of a simulator: faults, records, issued access tokens and stats. A value type
/// behind a lock in ``FCMSimulator``; methods return what the caller must answer.
struct FCMSimulatorState {
    struct IssuedToken {
        var account: String
        var project: String
        var expiresAt: Date
    }

    var faults: FCMSimulatorFaults
    var messages: [RecordedFCMMessage] = []
    private var head = 0
    let maxRecorded: Int
    var stats = FCMSimulatorStats()
    private var tokens: [String: IssuedToken] = [:]
    private var tokenOrder: [String] = []
    let maxTokens: Int

    init(faults: FCMSimulatorFaults, maxRecorded: Int, maxTokens: Int) {
        self.faults = faults
        self.maxRecorded = max(1, maxRecorded)
        self.maxTokens = max(1, maxTokens)
    }

    // MARK: Access tokens

    mutating func issue(_ token: String, account: String, project: String, expiresAt: Date, now: Date) {
        if tokens.count >= maxTokens {
            tokens = tokens.filter { $0.value.expiresAt > now }
            tokenOrder.removeAll { tokens[$0] == nil }
            while tokens.count >= maxTokens, !tokenOrder.isEmpty {
                tokens[tokenOrder.removeFirst()] = nil
            }
        }
        tokens[token] = IssuedToken(account: account, project: project, expiresAt: expiresAt)
        tokenOrder.append(token)
        stats.tokensIssued += 1
    }

    func lookUp(_ token: String) -> IssuedToken? {
        tokens[token]
    }

    /// Forgets every issued access token: requests with them get 401 from now on.
    mutating func revokeAccessTokens() {
        tokens = [:]
        tokenOrder = []
    }

    // MARK: Faults

    /// The injected error for a message that would otherwise be accepted (token outcome first, then the error rate).
    mutating func injectedError(token: String, now: Date) -> FCMSimulatedError? {
        if let outcome = faults.tokenOutcomes[token] { return outcome }
        guard var rate = faults.errorRate, rate.isActive(at: now), Double.random(in: 0..<1) < rate.probability else { return nil }
        if let count = rate.count {
            rate.count = count - 1
            faults.errorRate = rate
        }
        return rate.error
    }

    /// Whether this token request fails by fault injection.
    mutating func tokenEndpointFailure() -> FCMTokenEndpointFault? {
        guard var fault = faults.tokenEndpoint, fault.count.map({ $0 > 0 }) ?? true,
            Double.random(in: 0..<1) < fault.probability
        else { return nil }
        if let count = fault.count {
            fault.count = count - 1
            faults.tokenEndpoint = fault
        }
        return fault
    }

    // MARK: Records

    mutating func record(_ message: RecordedFCMMessage) {
        stats.accepted += 1
        if messages.count < maxRecorded {
            messages.append(message)
        } else {
            messages[head] = message
            head = (head + 1) % maxRecorded
            stats.recordsDropped += 1
        }
    }

    /// Oldest first.
    var orderedMessages: [RecordedFCMMessage] {
        Array(messages[head...] + messages[..<head])
    }

    mutating func clearMessages() {
        messages = []
        head = 0
    }

    var currentStats: FCMSimulatorStats {
        var copy = stats
        copy.recorded = messages.count
        return copy
    }
}
