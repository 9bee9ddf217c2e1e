import AsyncHTTPClient
import Foundation
import Locking
import NIOCore
import ProcessStack

/// `callpush-bench drain --rate N…`: ring latency at a fixed offered load through dispatch, from
/// the moment a `POST /v1/calls` is sent to the moment the APNs simulator received the push.
///
/// Starts the release `callpush dev` as its own process (embedded Kafka, simulator, dispatch and
/// push-workers in one process, as a developer runs it), waits for its state file, then POSTs
/// one-device rings on an open-loop schedule (each due request is sent whether or not earlier ones
/// were answered) and matches each call id to the simulator's record of its push
/// (`GET /admin/pushes`). Both clocks are this machine's wall clock.
struct RateLatency {
    let binDir: String
    let directory: String
    let partitions: Int
    let workers: Int

    struct DevState: Decodable {
        var dispatchURL: String
        var apiKey: String
        var simulatorAdminURL: String?
        var app: String
    }

    func run(rates: [Int], seconds: Int) async throws {
        let stateFile = directory + "/dev-state.json"
        try? FileManager.default.removeItem(atPath: stateFile)
        let dev = try ChildProcess(
            name: "callpush-dev", executable: binDir + "/callpush",
            arguments: ["dev", "--port", "0", "--state-file", stateFile, "--log-level", "warning",
                        "--partitions", "\(partitions)", "--workers", "\(workers)"],
            environment: [:], logPath: directory + "/callpush-dev.log")
        let client = HTTPClient(eventLoopGroupProvider: .singleton,
                                configuration: .init(connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 256)))
        var failure: (any Error)?
        do {
            let state = try await waitForState(stateFile, dev: dev)
            guard let admin = state.simulatorAdminURL else { throw StackError("callpush dev runs its simulator without the admin API") }
            print("callpush-bench drain --rate: callpush dev (\(partitions) partitions, \(workers) push-workers), \(seconds) s per rate, "
                  + "\(ProcessInfo.processInfo.activeProcessorCount) cores")
            print("offered/s  achieved/s  answered 202  pushed   ring latency ms: p50    p90    p99    max   POST answer ms: p50  p99  load")
            for rate in rates {
                // A second at the rate first (connections, JIT-free but cold caches, producer batches), not measured.
                _ = try await load(rate: rate, seconds: 1, state: state, admin: admin, client: client)
                let result = try await load(rate: rate, seconds: seconds, state: state, admin: admin, client: client)
                print(result)
            }
        } catch {
            failure = error
        }
        try? await client.shutdown()
        await dev.stop(timeout: .seconds(20))
        if let failure { throw failure }
    }

    private func waitForState(_ path: String, dev: ChildProcess) async throws -> DevState {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if dev.exit != nil { throw StackError("callpush dev exited during start-up (see \(dev.logPath))") }
            if let data = FileManager.default.contents(atPath: path), let state = try? JSONDecoder().decode(DevState.self, from: data) {
                return state
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw StackError("callpush dev was not ready within 120 s (see \(dev.logPath))")
    }

    private struct Sent: Sendable {
        var at: Date
        var status: UInt
        var answeredMs: Double
    }

    private func load(rate: Int, seconds: Int, state: DevState, admin: String, client: HTTPClient) async throws -> String {
        let http = LocalHTTP()
        _ = try? await http.send("DELETE", admin + "/admin/pushes")
        let load = loadAverage()
        let total = rate * seconds
        let sent = Locked<[String: Sent]>([:])
        let start = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            var issued = 0
            while issued < total {
                let due = min(total, Int((ContinuousClock.now - start).inSeconds * Double(rate)) + 1)
                while issued < due {
                    issued += 1
                    let callId = UUID.randomVersion4().lowercasedText
                    let token = StackFiles.randomHex(32)
                    group.addTask {
                        let body = #"{"callId":"\#(callId)","app":"\#(state.app)","devices":[{"token":"\#(token)","environment":"sandbox"}],"#
                            + #""caller":{"handle":"driver-1","displayName":"Driver"}}"#
                        var request = HTTPClientRequest(url: state.dispatchURL + "/v1/calls")
                        request.method = .POST
                        request.headers.add(name: "Authorization", value: "Bearer " + state.apiKey)
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.body = .bytes(ByteBuffer(string: body))
                        let at = Date()
                        let clock = ContinuousClock.now
                        var status: UInt = 0
                        if let response = try? await client.execute(request, timeout: .seconds(10)) {
                            status = response.status.code
                            _ = try? await response.body.collect(upTo: 1 << 20)
                        }
                        let answered = (ContinuousClock.now - clock).inSeconds * 1000
                        sent.withLock { $0[callId] = Sent(at: at, status: status, answeredMs: answered) }
                    }
                }
                try? await Task.sleep(for: .milliseconds(1))
            }
            await group.waitForAll()
        }
        let achieved = Double(total) / (ContinuousClock.now - start).inSeconds
        try await Task.sleep(for: .seconds(3))  // the last pushes
        let response = try await http.send("GET", admin + "/admin/pushes", timeout: 30)
        let pushes = (try? JSONSerialization.jsonObject(with: response.body) as? [[String: Any]]) ?? []
        let calls = sent.withLock { $0 }
        var latencies: [Double] = []
        for push in pushes {
            guard let payload = push["payload"] as? String, let receivedText = push["receivedAt"] as? String,
                  let received = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(receivedText),
                  let range = payload.range(of: #""callId":""#) else { continue }
            let callId = String(payload[range.upperBound...].prefix(36))
            guard let call = calls[callId] else { continue }
            latencies.append(received.timeIntervalSince(call.at) * 1000)
        }
        let accepted = calls.values.filter { $0.status == 202 }.count
        let answers = calls.values.map(\.answeredMs).sorted()
        latencies.sort()
        func percentile(_ values: [Double], _ p: Double) -> Double {
            values.isEmpty ? .nan : values[min(values.count - 1, Int(Double(values.count) * p))]
        }
        return String(format: "%9d  %10.0f  %12d  %6d  %20.1f %6.1f %6.1f %6.1f  %19.1f %4.1f  ", rate, achieved, accepted, latencies.count,
                      percentile(latencies, 0.5), percentile(latencies, 0.9), percentile(latencies, 0.99), latencies.last ?? .nan,
                      percentile(answers, 0.5), percentile(answers, 0.99)) + load
    }
}
