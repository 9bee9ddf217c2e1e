import CallpushCore
import CallpushTestSupport
import Foundation
import Locking
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing
@testable import APNs
@testable import FCM
@testable import PushWorker

/// The event loops the APNs and FCM connections run on (`CALLPUSH_PUSH_EVENT_LOOPS`).
@Suite struct PushEventLoops {
    @Test func oneLoopUnlessConfiguredAndTheValueIsBounded() throws {
        let files = try WorkerEnvironmentLoading.Files()
        #expect(try WorkerEnvironment.load(files.env).pushEventLoops == 1)
        var env = files.env
        env["CALLPUSH_PUSH_EVENT_LOOPS"] = "4"
        #expect(try WorkerEnvironment.load(env).pushEventLoops == 4)
        for bad in ["0", "65", "two"] {
            env["CALLPUSH_PUSH_EVENT_LOOPS"] = bad
            #expect(WorkerEnvironmentLoading().error(env)?.key == "CALLPUSH_PUSH_EVENT_LOOPS", "\(bad)")
        }
    }

    @Test func theAPNsAndFCMClientsRunOnTheGroupTheyAreGiven() async throws {
        let files = try WorkerEnvironmentLoading.Files()
        let accountPath = try WorkerEnvironmentLoading().writeServiceAccount(files)
        let keyPath = files.directory.appendingPathComponent("AuthKey.p8").path
        try #"""
        {"rider": {"bundleId": "com.example.rider", "auth": "token", "keyFile": "\#(keyPath)", "keyId": "ABC123DEFG", "teamId": "TEAM123456",
                   "fcm": {"serviceAccountFile": "\#(accountPath)"}}}
        """#.write(toFile: files.appsPath, atomically: true, encoding: .utf8)
        let environment = try WorkerEnvironment.load(files.env)
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let (apns, fcm) = try PushWorkerApp.clients(environment, on: loops, logger: Logger(label: "test"))
        #expect((try #require(apns)).group === loops)
        #expect((try #require(fcm)).group === loops)
        await apns?.shutdown()
        await fcm?.shutdown()
        try await loops.shutdownGracefully()
    }

    /// The worker's runs go where it is told (the program gives it the push loops): every push of a
    /// partition is handed to the sender on that partition's loop (partition mod loops), and without
    /// executors on none.
    @Test func aWorkersRunsRunOnTheEventLoopsItIsGiven() async throws {
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let executors = PushWorkerApp.taskExecutors(on: loops)
        #expect(executors.count == 2)
        try await WorkerTestbed.with(partitions: 4) { bed in
            for given in [executors, []] {
                let sender = LoopRecordingSender(loops: loops)
                let worker = try bed.startWorker("worker-\(given.count)", sender: sender, executors: given)
                let rings = (0..<40).map { i in makeRing(token: hexToken(given.count * 100 + i)) }
                let stored = try await bed.produce(rings.map { .ring($0) })
                let partitionOf = Dictionary(uniqueKeysWithValues: zip(rings.map(\.device.token), stored.map(\.partition)))
                let statuses = try await bed.collectStatuses(until: { log in rings.allSatisfy { !log.terminal($0.callId).isEmpty } }, seconds: 60)
                statuses.expectEachPushedOnceAndSent(rings, pushedTokens: sender.pushes.map(\.token))
                #expect(Set(stored.map(\.partition)).count > 1, "the rings spread over partitions")
                for push in sender.pushes {
                    // Without executors, nothing runs on the loops; with them, partition p's runs on loop p % 2.
                    let expected = given.isEmpty ? nil : partitionOf[push.token].map { Int($0) % 2 }
                    #expect(push.loop == expected, "partition \(partitionOf[push.token].map(String.init) ?? "?")")
                }
                await bed.stop([worker])
            }
        }
        try await loops.shutdownGracefully()
    }

    @Test func theLoopsServeUntilTheServiceGroupShutsDown() async throws {
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let group = ServiceGroup(configuration: .init(services: [.init(service: EventLoopGroupService(loops))], logger: Logger(label: "test")))
        let ended = Locked(false)
        let running = Task {
            try await group.run()
            ended.withLock { $0 = true }
        }
        // The service does not end (and take its loops with it) on its own.
        try await Task.sleep(for: .milliseconds(200))
        #expect(!ended.withLock { $0 })
        #expect(try await loops.next().submit { 42 }.get() == 42)
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(ended.withLock { $0 })
    }
}

/// Answers every push `sent` and records, per push, which of `loops` it was handed over on (nil: none).
final class LoopRecordingSender: VoIPPushSending {
    struct Push: Sendable { var token: String; var loop: Int? }
    let loops: [any EventLoop]
    private let recorded = Locked<[Push]>([])

    init(loops: MultiThreadedEventLoopGroup) {
        self.loops = Array(loops.makeIterator())
    }

    var pushes: [Push] { recorded.withLock { $0 } }

    func send(_ push: VoIPPush) async -> PushAttempt {
        let loop = loops.firstIndex { $0.inEventLoop }
        recorded.withLock { $0.append(Push(token: push.deviceToken, loop: loop)) }
        return PushAttempt(disposition: .sent, status: 200)
    }
}
