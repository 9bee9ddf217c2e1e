import CallContract
import Foundation

/// Identifies a call in the status view: a call id belongs to a tenant, and two tenants may use
/// the same id without seeing each other's call. Events without a tenant have tenant "".
public struct CallKey: Hashable, Sendable, CustomStringConvertible {
    public var tenant: String
    public var callId: String

    public init(tenant: String?, callId: String) {
        self.tenant = tenant ?? ""
        self.callId = callId
    }

    public var description: String { tenant.isEmpty ? callId : "\(tenant)/\(callId)" }
}

/// What the status view knows about one call: its deliveries (one per device), the worker's
/// latest state of each and what the device itself reported.
public struct CallView: Sendable, Hashable {
    /// What the device reported through the ack, kept apart from the worker's state (the two race,
    /// and a report does not end the worker's delivery).
    public struct DeviceReport: Sendable, Hashable {
        /// The status dispatch published for the ack (`reported` or `suppressed`).
        public var status: CallStatus
        /// Its SSE event id.
        public var eventID: Int64
    }

    /// One device's delivery.
    public struct Delivery: Sendable, Hashable {
        /// Identifies the delivery (hash of the token).
        public var deviceKey: String
        /// The backend's device id, if given.
        public var deviceId: String?
        /// From the ring event, when known.
        public var environment: APNSEnvironment?
        /// Replay generation of the ring or of the latest worker status.
        public var replay: Int
        /// `requestedAt` of the ring, until a worker status arrives.
        public var queuedAt: Date
        /// The worker's latest status, if any arrived.
        public var lastStatus: CallStatus?
        /// Its SSE event id.
        public var statusEventID: Int64 = 0
        /// The device's latest report, if any.
        public var report: DeviceReport?

        /// `queued` until the worker's first status, then that status's state.
        public var state: String { lastStatus?.state.rawValue ?? "queued" }

        /// Whether the worker is done with it (anything but `queued` and `retrying`).
        public var isTerminal: Bool { lastStatus?.state.isTerminal ?? false }

        /// Approximate heap bytes held (strings, the statuses and the bookkeeping around them).
        var estimatedBytes: Int {
            384 + deviceKey.utf8.count + (deviceId?.utf8.count ?? 0)
                + (lastStatus?.estimatedBytes ?? 0) + (report.map { 16 + $0.status.estimatedBytes } ?? 0)
        }
    }

    /// The call.
    public var callId: String
    /// The tenant that rang it (nil: events without a tenant).
    public var tenant: String?
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
    /// The highest SSE event id of its statuses.
    public var lastEventID: Int64 = 0

    /// An empty view of a call.
    public init(callId: String, tenant: String? = nil) {
        self.callId = callId
        self.tenant = tenant
    }

    /// True once every known delivery is terminal for the worker (and there is at least one).
    /// Device reports do not complete a call: an ack may arrive while the worker still retries.
    public var isComplete: Bool { !deliveries.isEmpty && deliveries.allSatisfy(\.isTerminal) }

    /// Every status held, worker states and device reports, in event-id order.
    public var events: [(id: Int64, status: CallStatus)] {
        var events: [(id: Int64, status: CallStatus)] = []
        for delivery in deliveries {
            if let status = delivery.lastStatus { events.append((delivery.statusEventID, status)) }
            if let report = delivery.report { events.append((report.eventID, report.status)) }
        }
        return events.sorted { $0.id < $1.id }
    }

    /// The latest status of every delivery that has one (worker states, then device reports).
    public var statuses: [CallStatus] { events.map(\.status) }

    /// Approximate heap bytes held by this call in the view.
    var estimatedBytes: Int {
        deliveries.reduce(480 + callId.utf8.count + (tenant?.utf8.count ?? 0) + (app?.utf8.count ?? 0)) { $0 + $1.estimatedBytes }
    }

    mutating func apply(ring: RingRequest, deviceKey key: String, partition: Int32?) {
        app = app ?? ring.app
        tenant = tenant ?? ring.tenant
        requestedAt = requestedAt ?? ring.requestedAt
        ringDeadline = max(ringDeadline ?? ring.ringDeadline, ring.ringDeadline)
        if let partition { self.partition = partition }
        if let index = deliveries.firstIndex(where: { $0.deviceKey == key }) {
            deliveries[index].deviceId = deliveries[index].deviceId ?? ring.device.id
            deliveries[index].environment = ring.device.environment
            if deliveries[index].lastStatus == nil { deliveries[index].replay = max(deliveries[index].replay, ring.replay) }
            return
        }
        deliveries.append(Delivery(deviceKey: key, deviceId: ring.device.id, environment: ring.device.environment,
                                   replay: ring.replay, queuedAt: ring.requestedAt))
    }

    /// Applies a status with its event id (its offset on the status partition, or a local number);
    /// false when nothing changed or it is older than what is known (an earlier replay generation).
    mutating func apply(status: CallStatus, partition: Int32?, eventID: Int64) -> Bool {
        app = app ?? status.app
        tenant = tenant ?? status.tenant
        if let partition, self.partition == nil { self.partition = partition }
        let key = status.deviceKey ?? ""
        let index = deliveries.firstIndex(where: { $0.deviceKey == key })
        var delivery = index.map { deliveries[$0] }
            ?? Delivery(deviceKey: key, deviceId: status.deviceId, environment: nil, replay: status.replay, queuedAt: status.at)
        if status.state.isDeviceReport {
            if let known = delivery.report?.status, known == status || (known.replay, known.at) > (status.replay, status.at) { return false }
            delivery.report = DeviceReport(status: status, eventID: eventID)
        } else {
            if index != nil, status.replay < delivery.replay, delivery.lastStatus != nil { return false }
            if delivery.lastStatus == status { return false }
            delivery.lastStatus = status
            delivery.statusEventID = eventID
            delivery.replay = status.replay
        }
        delivery.deviceId = delivery.deviceId ?? status.deviceId
        lastEventID = max(lastEventID, eventID)
        if let index { deliveries[index] = delivery } else { deliveries.append(delivery) }
        return true
    }
}

extension CallStatus {
    /// Approximate heap bytes of a status held in memory (fixed part plus its strings).
    var estimatedBytes: Int {
        var strings = callId.utf8.count + worker.utf8.count
        for text in [deviceId, deviceKey, app, tenant, apns?.id, apns?.uniqueId, apns?.reason, fcm?.name, fcm?.errorCode,
                     error?.code, error?.message, error?.domain] {
            strings += text.map { 16 + $0.utf8.count } ?? 0
        }
        return 320 + strings
    }
}
