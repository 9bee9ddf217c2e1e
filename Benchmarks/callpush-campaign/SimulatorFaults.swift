import Foundation
import ProcessStack

/// A simulator's fault set as the campaign composes it (one for the APNs simulator, one for the FCM
/// simulator): fixed answers for some device tokens (mismatched environments, doomed devices), which
/// stay while time-windowed faults (503, GOAWAY, resets, 429, latency) come and go.
/// `PUT /admin/faults` replaces the whole set on both simulators, so every change sends both parts;
/// the actor keeps changes in order. It also remembers the windows of the time-windowed faults:
/// rings that overlap them do not count for `max_ring_ms`.
actor SimulatorFaults {
    /// A stretch of time during which the simulator answered with a fault.
    struct Window: Sendable {
        var kind: String
        var from: Date
        var to: Date
    }

    private let http: LocalHTTP
    private let adminURL: String
    /// Token → the answer every push to it gets, as the simulator's JSON object.
    private var tokenOutcomes: [String: String] = [:]
    /// The time-windowed fault in force, as JSON (`{}` when none).
    private var windowFault = "{}"
    private var windowStart: (kind: String, at: Date)?
    private(set) var windows: [Window] = []

    init(http: LocalHTTP, adminURL: String) {
        self.http = http
        self.adminURL = adminURL
    }

    /// Every push to `tokens` is answered `status` `reason` (the APNs simulator's form) until ``clear(_:)``.
    func refuse(_ tokens: [String], status: Int, reason: String) async throws {
        try await refuse(tokens, outcome: #"{"status":\#(status),"reason":"\#(reason)"}"#)
    }

    /// Every message to `tokens` is answered with FCM error `errorCode` (the FCM simulator's form) until ``clear(_:)``.
    func refuse(_ tokens: [String], errorCode: String) async throws {
        try await refuse(tokens, outcome: #"{"errorCode":"\#(errorCode)"}"#)
    }

    private func refuse(_ tokens: [String], outcome json: String) async throws {
        for token in tokens { tokenOutcomes[token] = json }
        try await apply()
    }

    /// Pushes to `tokens` are answered normally again.
    func clear(_ tokens: [String]) async throws {
        for token in tokens { tokenOutcomes[token] = nil }
        try await apply()
    }

    /// Puts the time-windowed fault `json` in force (`kind` names it in the report).
    func begin(_ kind: String, _ json: String) async throws {
        windowFault = json
        windowStart = (kind, Date())
        try await apply()
    }

    /// Ends the time-windowed fault.
    func end() async throws {
        windowFault = "{}"
        if let start = windowStart { windows.append(Window(kind: start.kind, from: start.at, to: Date())) }
        windowStart = nil
        try await apply()
    }

    private func apply() async throws {
        guard var faults = try JSONSerialization.jsonObject(with: Data(windowFault.utf8)) as? [String: Any] else {
            throw StackError("simulator fault \(windowFault) is not a JSON object")
        }
        faults["tokenOutcomes"] = try tokenOutcomes.mapValues { try JSONSerialization.jsonObject(with: Data($0.utf8)) }
        let body = try JSONSerialization.data(withJSONObject: faults)
        let response = try await http.send("PUT", "\(adminURL)/faults", body: body)
        guard response.status == 200 || response.status == 204 else {
            throw StackError("PUT /admin/faults answered \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))")
        }
    }
}
