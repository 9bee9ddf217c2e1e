import CallContract
import Foundation

/// What the status view knows about one call: its deliveries (one per device) and their latest states.
public struct CallView: Sendable, Hashable {
    /// One device's delivery.
    public struct Delivery: Sendable, Hashable {
        /// Identifies the delivery (hash of the token).
        public var deviceKey: String
        /// The backend's device id, if given.
        public var deviceId: String?
        /// From the ring event, when known.
        public var environment: APNsEnvironment?
        /// `queued` until the first status, then the latest `CallStatus.State`.
        public var state: String
        /// Attempt number of the latest status (0 before any push).
        public var attempt: Int
        /// Replay generation of the latest status.
        public var replay: Int
        /// When the latest state was reached (`requestedAt` while queued).
        public var at: Date
        /// What APNs answered, if a push was attempted.
        public var apns: CallStatus.APNsDetails?
        /// Why it failed or was suppressed.
        public var error: CallStatus.ErrorInfo?
        /// The latest status event, if any arrived.
        public var lastStatus: CallStatus?

        /// Whether the worker is done with it (anything but `queued` and `retrying`).
        public var isTerminal: Bool {
            guard let lastStatus else { return false }
            return lastStatus.state.isTerminal
        }
    }

    /// The call.
    public var callId: String
    /// The app, once known.
    public var app: String?
    /// From the ring events, once known.
    public var requestedAt: Date?
    /// The latest ring deadline of its ring events.
    public var ringDeadline: Date?
    /// The partition number its requests are on (statuses dispatch writes go to the same number).
    public var partition: Int32?
    /// In the order they were first seen (request order for calls this instance published).
    public var deliveries: [Delivery] = []
    /// Whether this instance accepted the call (its webhooks are sent from here).
    public var acceptedHere = false

    /// An empty view of a call.
    public init(callId: String) { self.callId = callId }

    /// True once every known delivery is terminal (and there is at least one).
    public var isComplete: Bool { !deliveries.isEmpty && deliveries.allSatisfy(\.isTerminal) }

    /// The latest status of every delivery that has one.
    public var statuses: [CallStatus] { deliveries.compactMap(\.lastStatus) }

    mutating func apply(ring: RingRequest, deviceKey key: String, partition: Int32?) {
        app = app ?? ring.app
        requestedAt = requestedAt ?? ring.requestedAt
        ringDeadline = max(ringDeadline ?? ring.ringDeadline, ring.ringDeadline)
        if let partition { self.partition = partition }
        if let index = deliveries.firstIndex(where: { $0.deviceKey == key }) {
            deliveries[index].deviceId = deliveries[index].deviceId ?? ring.device.id
            deliveries[index].environment = ring.device.environment
            return
        }
        deliveries.append(Delivery(deviceKey: key, deviceId: ring.device.id, environment: ring.device.environment, state: "queued",
                                   attempt: 0, replay: ring.replay, at: ring.requestedAt))
    }

    /// Applies a status; false when it is older than what is known (an earlier replay generation).
    mutating func apply(status: CallStatus, partition: Int32?) -> Bool {
        app = app ?? status.app
        if let partition, self.partition == nil { self.partition = partition }
        let key = status.deviceKey ?? ""
        var delivery: Delivery
        let index = deliveries.firstIndex(where: { $0.deviceKey == key })
        if let index {
            delivery = deliveries[index]
            if status.replay < delivery.replay && delivery.lastStatus != nil { return false }
        } else {
            delivery = Delivery(deviceKey: key, deviceId: status.deviceId, environment: nil, state: "queued",
                                attempt: 0, replay: status.replay, at: status.at)
        }
        if delivery.lastStatus == status { return false }
        delivery.deviceId = delivery.deviceId ?? status.deviceId
        delivery.state = status.state.rawValue
        delivery.attempt = status.attempt
        delivery.replay = status.replay
        delivery.at = status.at
        delivery.apns = status.apns
        delivery.error = status.error
        delivery.lastStatus = status
        if let index { deliveries[index] = delivery } else { deliveries.append(delivery) }
        return true
    }
}
