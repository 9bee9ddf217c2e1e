import CallContract
import Foundation

/// JSON bodies of the API's answers (field names as in docs/dispatch.md and docs/openapi.json).
enum APIModels {
    struct Accepted: Encodable {
        struct Delivery: Encodable {
            var deviceKey: String
            var deviceId: String?
            /// iOS devices only.
            var environment: APNSEnvironment?
            /// Android devices only (absent: iOS, as in the event).
            var platform: DevicePlatform?
            var state = "queued"
        }
        var callId: String
        var app: String
        var requestedAt: String
        var ringDeadline: String
        var deliveries: [Delivery]

        init(rings: [RingRequest], deviceKeys: [String]? = nil) {
            let keys = deviceKeys ?? rings.map { DeviceKey.make(token: $0.device.token) }
            let first = rings[0]
            callId = first.callId
            app = first.app
            requestedAt = ContractCoding.format(first.requestedAt)
            ringDeadline = ContractCoding.format(first.ringDeadline)
            deliveries = zip(rings, keys).map { ring, key in
                Delivery(deviceKey: key, deviceId: ring.device.id, environment: ring.device.environment,
                         platform: ring.device.platform == .ios ? nil : ring.device.platform)
            }
        }

        /// The same bytes as ``APIModels/encode(_:)``, written directly (the answer to every ring).
        func encoded() -> Data {
            var json = ContractJSONWriter(capacity: 256)
            json.object { json in
                json.member("app", app)
                json.member("callId", callId)
                json.member("deliveries", objects: deliveries) { json, delivery in
                    if let deviceId = delivery.deviceId { json.member("deviceId", deviceId) }
                    json.member("deviceKey", delivery.deviceKey)
                    if let environment = delivery.environment { json.member("environment", environment.rawValue) }
                    if let platform = delivery.platform { json.member("platform", platform.rawValue) }
                    json.member("state", delivery.state)
                }
                json.member("requestedAt", requestedAt)
                json.member("ringDeadline", ringDeadline)
            }
            return json.data
        }
    }

    struct Cancelled: Encodable {
        var callId: String
        var cancelledAt: String
    }

    struct CancelBody: Decodable {
        var reason: String?
    }

    struct AckAccepted: Encodable {
        var callId: String
        var deviceKey: String
        var state: String
    }

    struct CallState: Encodable {
        /// What the device reported through the ack, apart from the worker's `state`.
        struct DeviceReport: Encodable {
            var outcome: String
            var replay: Int
            var at: String
            var error: CallStatus.ErrorInfo?
        }

        struct Delivery: Encodable {
            var deviceKey: String
            var deviceId: String?
            var state: String
            var attempt: Int
            var replay: Int
            var at: String
            var apns: CallStatus.APNSDetails?
            var fcm: CallStatus.FCMDetails?
            var error: CallStatus.ErrorInfo?
            var deviceReport: DeviceReport?

            init(_ delivery: CallView.Delivery) {
                let status = delivery.lastStatus
                deviceKey = delivery.deviceKey
                deviceId = delivery.deviceId
                state = delivery.state
                attempt = status?.attempt ?? 0
                replay = delivery.replay
                at = ContractCoding.format(status?.at ?? delivery.queuedAt)
                apns = status?.apns
                fcm = status?.fcm
                error = status?.error
                deviceReport = delivery.report.map {
                    DeviceReport(outcome: $0.status.state.rawValue, replay: $0.status.replay, at: ContractCoding.format($0.status.at),
                                 error: $0.status.error)
                }
            }
        }
        var callId: String
        var app: String?
        var ringDeadline: String?
        var complete: Bool
        var deliveries: [Delivery]

        init(_ view: CallView) {
            callId = view.callId
            app = view.app
            ringDeadline = view.ringDeadline.map(ContractCoding.format)
            complete = view.isComplete
            deliveries = view.deliveries.map(Delivery.init)
        }
    }

    static func encode<T: Encodable>(_ value: T) -> Data {
        (try? ContractCoding.encode(value)) ?? Data("{}".utf8)
    }
}
