import APNsSimulator
import CallContract
import Foundation
import Locking
import DispatchService

/// `callpush dev --demo`: rings four calls through dispatch's HTTP API, each meeting a different
/// fate, and prints every status change live as dispatch streams it (Server-Sent Events):
/// one is answered by APNs (`sent`), one hits a dead token (`failed`, Unregistered), one is
/// cancelled while APNs keeps answering 503 (`cancelled`), one rings through an APNs outage until
/// its ring deadline passes (`expired`).
struct DevDemo {
    struct Scenario: Sendable {
        var name: String
        var token: String
        var ringTimeoutSeconds: Int
        var expected: CallStatus.State
        var cancelAfterFirstRetry = false
    }

    /// One demo call's end.
    struct Result: Sendable, Equatable {
        var name: String
        var expected: CallStatus.State
        var final: CallStatus.State?
        var passed: Bool { final == expected }
    }

    let stack: DevStack
    let state: DevState
    var print: @Sendable (String) -> Void = { line in FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

    static func token() -> String { DevStack.randomHex(bytes: 32) }

    /// Runs the demo; returns each call's expected and final state.
    @discardableResult
    func run() async throws -> [Result] {
        let scenarios = [
            Scenario(name: "answered", token: Self.token(), ringTimeoutSeconds: 30, expected: .sent),
            Scenario(name: "dead token", token: Self.token(), ringTimeoutSeconds: 30, expected: .failed),
            Scenario(name: "cancelled", token: Self.token(), ringTimeoutSeconds: 30, expected: .cancelled, cancelAfterFirstRetry: true),
            Scenario(name: "APNs outage", token: Self.token(), ringTimeoutSeconds: 5, expected: .expired),
        ]
        var faults = APNSSimulatorFaults()
        faults.tokenOutcomes[scenarios[1].token] = .unregistered()
        let unavailable = TokenOutcome(status: 503, reason: "ServiceUnavailable")
        faults.tokenOutcomes[scenarios[2].token] = unavailable
        faults.tokenOutcomes[scenarios[3].token] = unavailable
        stack.simulator.setFaults(faults)
        defer { stack.simulator.setFaults(APNSSimulatorFaults()) }

        guard let base = URL(string: state.dispatchURL) else { throw DevStackError("bad dispatch URL \(state.dispatchURL)") }
        let http = HTTPExchange(baseURL: base, timeout: .seconds(10), caFile: nil)
        let auth = [("Authorization", "Bearer \(state.apiKey)")]
        print("demo: ringing \(scenarios.count) calls through \(state.dispatchURL) (statuses stream live below)")
        let started = Date()
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            for scenario in scenarios {
                let callId = CallID.make()
                let body = """
                    {"callId":"\(callId)","app":"\(state.app)","devices":[{"token":"\(scenario.token)","environment":"sandbox","id":"demo-\(scenario.name.replacingOccurrences(of: " ", with: "-"))"}],\
                    "caller":{"handle":"driver-1234","displayName":"Driver Tanaka"},"ringTimeoutSeconds":\(scenario.ringTimeoutSeconds),"attributes":{"rideId":"R-829"}}
                    """
                let answer = try await http.send(.POST, "/v1/calls", headers: auth + [("Content-Type", "application/json")], body: Array(body.utf8))
                guard answer.status == 202 else { throw DevStackError("POST /v1/calls answered \(answer.status): \(answer.bodyText)") }
                group.addTask { try await follow(scenario, callId: callId, http: http, auth: auth, started: started) }
                if scenario.cancelAfterFirstRetry {
                    group.addTask {
                        try await cancelAfterFirstRetry(callId: callId, http: http, auth: auth)
                        return nil
                    }
                }
            }
            var results: [Result] = []
            for try await result in group { if let result { results.append(result) } }
            results.sort { a, b in scenarios.firstIndex { $0.name == a.name } ?? 0 < scenarios.firstIndex { $0.name == b.name } ?? 0 }
            for result in results {
                print("demo: \(result.name.padding(toLength: 12, withPad: " ", startingAt: 0)) → \(result.final?.rawValue ?? "no final status") "
                      + (result.passed ? "(as expected)" : "(expected \(result.expected.rawValue))"))
            }
            return results
        }
    }

    /// Streams one call's statuses until its delivery is terminal; cancels it when the scenario says so.
    private func follow(_ scenario: Scenario, callId: String, http: HTTPExchange, auth: [(String, String)], started: Date) async throws -> Result {
        let events = SSELineSplitter()
        let final = Locked<CallStatus.State?>(nil)
        let print = self.print
        let stream = try await http.send(.GET, "/v1/calls/\(callId)/events", headers: auth + [("Accept", "text/event-stream")],
                                         timeout: .seconds(scenario.ringTimeoutSeconds + 30)) { chunk in
            for event in events.feed(chunk) {
                if event.name == "end" { return false }
                guard event.name == "status", let status = try? CallStatus.decode(Data(event.data.utf8)) else { continue }
                let elapsed = String(format: "%6.2fs", status.at.timeIntervalSince(started))
                var line = "  \(elapsed)  \(scenario.name.padding(toLength: 12, withPad: " ", startingAt: 0)) \(status.state.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0))"
                if status.attempt > 0 { line += " attempt \(status.attempt)" }
                if let apns = status.apns, let code = apns.status { line += "  APNs \(code)\(apns.reason.map { " \($0)" } ?? "")" }
                if let error = status.error { line += "  error \(error.code)" }
                print(line)
                if status.state.isTerminal { final.withLock { $0 = status.state } }
            }
            return true
        }
        guard stream.status == 200 else { throw DevStackError("GET /v1/calls/\(callId)/events answered \(stream.status)") }
        return Result(name: scenario.name, expected: scenario.expected, final: final.withLock { $0 })
    }

    /// Waits (in dispatch's view) for the call's first `retrying` status, then cancels it through the API.
    private func cancelAfterFirstRetry(callId: String, http: HTTPExchange, auth: [(String, String)]) async throws {
        let key = CallKey(tenant: DevStack.tenant, callId: callId)
        let deadline = ContinuousClock.now + .seconds(30)
        waiting: while ContinuousClock.now < deadline {
            guard let call = stack.dispatch.view.call(key) else { throw DevStackError("call \(callId) unknown to dispatch") }
            if call.isComplete { return }
            if call.deliveries.contains(where: { $0.state == CallStatus.State.retrying.rawValue }) { break waiting }
            try await Task.sleep(for: .milliseconds(20))
        }
        let answer = try await http.send(.DELETE, "/v1/calls/\(callId)", headers: auth + [("Content-Type", "application/json")],
                                         body: Array(#"{"reason":"rider cancelled"}"#.utf8))
        guard answer.status == 202 else { throw DevStackError("DELETE /v1/calls/\(callId) answered \(answer.status)") }
        print("  (cancel sent for \"cancelled\")")
    }
}
