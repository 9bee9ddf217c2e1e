import APNsSimulator
import ArgumentParser
import CallContract
import CallpushTestSupport
import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Locking
import Testing
@testable import CallpushCLI

@Suite struct DevMode {
    static let logger: Logger = {
        var logger = Logger(label: "dev-tests")
        logger.logLevel = .error
        return logger
    }()

    /// Runs the dev stack (dispatch on a free port) around `body`, then stops it gracefully.
    func withDevStack(_ body: (DevStack, DevState) async throws -> Void) async throws {
        let stack = try await DevStack.start(.init(brokers: 3, partitions: 2, workers: 2, dispatchPort: 0), logger: Self.logger)
        try await withRunning(stack.services, logger: Self.logger) {
            try await body(stack, try await stack.ready())
        }
    }

    @Test func aRingThroughDispatchReachesTheSimulatedPhoneAndIsReportedSent() async throws {
        try await withDevStack { stack, state in
            #expect(state.topics.requests == Topics.requests)
            #expect(FileManager.default.fileExists(atPath: state.caPath), "the simulator's CA is written for clients")
            #expect(state.apiKey.hasPrefix("cpdev_") && state.apiKey.count > 40)
            let http = HTTPExchange(baseURL: try #require(URL(string: state.dispatchURL)), timeout: .seconds(10), caFile: nil)
            let token = String(repeating: "5e", count: 32)
            let body = #"{"app":"\#(state.app)","devices":[{"token":"\#(token)","environment":"sandbox"}],"caller":{"handle":"driver-1"}}"#
            let refused = try await http.send(.POST, "/v1/calls", headers: [("Content-Type", "application/json")], body: Array(body.utf8))
            #expect(refused.status == 401, "the API needs the dev key")
            let answer = try await http.send(.POST, "/v1/calls", headers: [("Authorization", "Bearer \(state.apiKey)"), ("Content-Type", "application/json")],
                                             body: Array(body.utf8))
            #expect(answer.status == 202)
            let callId = try #require((try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["callId"] as? String)

            let deadline = ContinuousClock.now + .seconds(30)
            while stack.simulator.pushes().isEmpty && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            let pushes = stack.simulator.pushes()
            try #require(pushes.count == 1, "the ring reached the simulated phone")
            #expect(pushes[0].deviceToken == token)
            #expect(pushes[0].headers["apns-push-type"] == "voip")
            var delivery = ""
            while delivery != "sent" && ContinuousClock.now < deadline {
                let view = try await http.send(.GET, "/v1/calls/\(callId)", headers: [("Authorization", "Bearer \(state.apiKey)")])
                let json = try? JSONSerialization.jsonObject(with: Data(view.body)) as? [String: Any]
                delivery = ((json?["deliveries"] as? [[String: Any]])?.first?["state"] as? String) ?? ""
                if delivery != "sent" { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(delivery == "sent", "dispatch reports the delivery sent")
        }
    }

    /// One call to an iPhone and an Android phone through the dev stack: the APNs simulator gets
    /// the VoIP push, the FCM simulator the data message, dispatch reports both sent.
    @Test func aCallToAnIPhoneAndAnAndroidPhoneRingsBothSimulators() async throws {
        try await withDevStack { stack, state in
            #expect(state.fcmCAPath.map { FileManager.default.fileExists(atPath: $0) } == true, "the FCM simulator's CA is written for clients")
            let http = HTTPExchange(baseURL: try #require(URL(string: state.dispatchURL)), timeout: .seconds(10), caFile: nil)
            let iphone = String(repeating: "6f", count: 32)
            let android = "dev-0a1b:APA91b" + String(repeating: "Xy_9-", count: 24)
            let body = #"{"app":"\#(state.app)","devices":[{"token":"\#(iphone)","environment":"sandbox"},{"platform":"android","token":"\#(android)"}],"caller":{"handle":"driver-1"}}"#
            let answer = try await http.send(.POST, "/v1/calls", headers: [("Authorization", "Bearer \(state.apiKey)"), ("Content-Type", "application/json")],
                                             body: Array(body.utf8))
            #expect(answer.status == 202, "\(String(decoding: answer.body, as: UTF8.self))")
            let callId = try #require((try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["callId"] as? String)
            let deadline = ContinuousClock.now + .seconds(30)
            var states: [String] = []
            while states != ["sent", "sent"] && ContinuousClock.now < deadline {
                let view = try await http.send(.GET, "/v1/calls/\(callId)", headers: [("Authorization", "Bearer \(state.apiKey)")])
                let json = try? JSONSerialization.jsonObject(with: Data(view.body)) as? [String: Any]
                states = ((json?["deliveries"] as? [[String: Any]]) ?? []).compactMap { $0["state"] as? String }
                if states != ["sent", "sent"] { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(states == ["sent", "sent"], "dispatch reports both deliveries sent")
            #expect(stack.simulator.pushes().filter { $0.deviceToken == iphone }.count == 1, "the iPhone rang once")
            let messages = stack.fcmSimulator.messages().filter { $0.token == android }
            try #require(messages.count == 1, "the Android phone rang once")
            #expect(messages[0].data["callId"] == callId)
            #expect(messages[0].android?.priority == "HIGH")
        }
    }

    @Test func theDemoEndsWithItsFourOutcomes() async throws {
        try await withDevStack { stack, state in
            let lines = Locked<[String]>([])
            var demo = DevDemo(stack: stack, state: state)
            demo.print = { line in lines.withLock { $0.append(line) } }
            let results = try await demo.run()
            #expect(results.map(\.name) == ["answered", "dead token", "cancelled", "APNs outage"])
            #expect(results.map(\.final) == [.sent, .failed, .cancelled, .expired])
            let output = lines.withLock { $0 }
            #expect(output.contains { $0.contains("answered") && $0.contains("sent") && $0.contains("APNs 200") }, "the timeline is printed")
            #expect(output.contains { $0.contains("dead token") && $0.contains("Unregistered") })
            #expect(output.contains { $0.contains("APNs outage") && $0.contains("retrying") })
        }
    }

    @Test func devAsAChildProcessServesACurlRingAndStopsCleanlyOnSIGTERM() async throws {
        guard let curl = ChildProcess.findExecutable("curl") else {
            Issue.record("curl is not installed (scripts/install-deps installs it)")
            return
        }
        try await withTemporaryDirectory("dev-child") { directory in
            let statePath = directory.appendingPathComponent("state.json").path
            let process = try await ServerProcess("callpush", ["dev", "--port", "0", "--partitions", "2", "--state-file", statePath, "--log-level", "error"])
            _ = await process.wait(upTo: .seconds(90)) { FileManager.default.fileExists(atPath: statePath) }
            let data = try #require(FileManager.default.contents(atPath: statePath), "dev wrote its state file once ready; stderr:\n\(process.stderrTail())")
            let state = try JSONDecoder().decode(DevState.self, from: data)
            func mode(_ path: String) throws -> Int? { (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue }
            #expect(try mode(statePath) == 0o600, "the state file holds the API key: only its owner may read it")
            #expect(try mode(URL(fileURLWithPath: state.caPath).deletingLastPathComponent().path) == 0o700,
                    "the CA the user may trust lives in a private directory (mkdtemp)")
            let banner = process.stdout
            #expect(banner.contains(state.apiKey) && banner.contains("curl -s -X POST \(state.dispatchURL)/v1/calls"), "the banner prints the key and a curl ring")

            let token = String(repeating: "7a", count: 32)
            let ring = try await ChildProcess.run(curl, ["-s", "-X", "POST", "\(state.dispatchURL)/v1/calls",
                                                         "-H", "Authorization: Bearer \(state.apiKey)", "-H", "Content-Type: application/json",
                                                         "-d", #"{"app":"\#(state.app)","devices":[{"token":"\#(token)","environment":"sandbox"}],"caller":{"handle":"driver-1","displayName":"Driver Tanaka"}}"#],
                                                  timeout: .seconds(20))
            #expect(ring.stdout.contains("\"callId\""), "202 with the call: \(ring.stdout)")
            let admin = try #require(state.simulatorAdminURL)
            var received = false
            let deadline = ContinuousClock.now + .seconds(30)
            while !received && ContinuousClock.now < deadline {
                let pushes = try await ChildProcess.run(curl, ["-s", "\(admin)/admin/pushes"], timeout: .seconds(10))
                received = pushes.stdout.contains(token)
                if !received { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(received, "the simulated phone received the push")

            process.signal(SIGTERM)
            let status = await process.exitStatus(within: .seconds(30))
            #expect(status == 0, "Ctrl-C / SIGTERM stops everything cleanly")
            #expect(process.stdout.contains("callpush dev: stopped"))
        }
    }

    func firstStatus(kafka: KafkaConfiguration, partitions: Int32, seconds: Double) async throws -> CallStatus? {
        let consumer = try KafkaConsumer(configuration: KafkaConsumerConfiguration(kafka: kafka, mode: .manual), logger: Self.logger)
        try await consumer.assign((0..<partitions).map { KafkaPartitionAssignment(topic: Topics.status, partition: $0, start: .beginning) })
        let timer = Task {
            try? await Task.sleep(for: .seconds(seconds))
            await consumer.shutdown()
        }
        defer { timer.cancel() }
        for try await message in consumer.messages {
            if let status = try? CallStatus.decode(Data(message.value)), status.state.isTerminal {
                await consumer.shutdown()
                return status
            }
        }
        return nil
    }

    @Test(arguments: [["--brokers", "0"], ["--workers", "99"], ["--partitions", "x"], ["--log-level", "loud"], ["--nope"]])
    func badFlagsAreRefusedWithAClearMessage(arguments: [String]) {
        do {
            _ = try CallpushCommand.parseAsRoot(["dev"] + arguments)
            Issue.record("accepted \(arguments)")
        } catch {
            let message = CallpushCommand.message(for: error)
            #expect(!message.isEmpty)
            #expect(CallpushCommand.exitCode(for: error) != .success)
        }
    }
}
