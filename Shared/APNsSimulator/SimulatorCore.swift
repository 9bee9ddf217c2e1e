import Foundation
import Logging
import NIOCore
import Locking
import Synchronization

/// A registered connection, so faults and shutdown can reach it from any thread.
struct ConnectionHandle: Sendable {
    let id: Int
    let channel: any Channel
    let handler: NIOLoopBound<SimulatorConnectionHandler>
}

/// What every connection of one simulator shares: immutable settings plus the state behind a lock.
final class SimulatorCore: Sendable {
    let state: Locked<SimulatorState>
    let keys: [String: APNSSimulatorConfiguration.TokenKey]
    let environment: APNSEnvironment
    let clock: APNSSimulatorClock
    let allowUnauthenticated: Bool
    let baseMaxConcurrentStreams: Int
    let rampUpConcurrentStreams: Bool
    let logger: Logger
    /// Bumped after every change of the faults, so connections re-read them only then (not under the lock per push).
    let faultsVersion = Atomic<Int>(0)

    init(configuration: APNSSimulatorConfiguration, logger: Logger) {
        self.state = Locked(
            SimulatorState(faults: configuration.faults, maxRecordedPushes: configuration.maxRecordedPushes)
        )
        self.keys = Dictionary(configuration.tokenKeys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
        self.environment = configuration.environment
        self.clock = configuration.clock
        self.allowUnauthenticated = configuration.allowUnauthenticated
        self.baseMaxConcurrentStreams = max(1, min(configuration.maxConcurrentStreams, Int(Int32.max)))
        self.rampUpConcurrentStreams = configuration.rampUpConcurrentStreams
        self.logger = logger
    }

    var faults: APNSSimulatorFaults {
        state.withLock { $0.faults }
    }

    /// The `MAX_CONCURRENT_STREAMS` connections should announce once authenticated.
    func maxConcurrentStreams(_ faults: APNSSimulatorFaults) -> Int {
        faults.maxConcurrentStreams ?? baseMaxConcurrentStreams
    }

    /// Replaces the faults and tells open connections about a changed stream limit or responsiveness.
    func setFaults(_ faults: APNSSimulatorFaults) {
        let normalized = faults.normalized
        let (limitChanged, responsivenessChanged, handles) = state.withLock { state in
            let limitChanged = state.faults.maxConcurrentStreams != normalized.maxConcurrentStreams
            let responsivenessChanged = state.faults.unresponsive != normalized.unresponsive
            state.faults = normalized
            return (limitChanged, responsivenessChanged, Array(state.connections.values))
        }
        faultsVersion.add(1, ordering: .releasing)
        if responsivenessChanged {
            for handle in handles {
                handle.channel.setOption(ChannelOptions.autoRead, value: !normalized.unresponsive).whenComplete { _ in
                    if !normalized.unresponsive { handle.channel.read() }
                }
            }
        }
        guard limitChanged else { return }
        let limit = maxConcurrentStreams(normalized)
        for handle in handles {
            handle.channel.eventLoop.execute {
                handle.handler.value.announceMaxConcurrentStreams(limit)
            }
        }
    }

    func reject(_ reason: String) {
        state.withLock { $0.reject(reason) }
    }

    func count(_ update: (inout APNSSimulatorStats) -> Void) {
        state.withLock { update(&$0.stats) }
    }
}
