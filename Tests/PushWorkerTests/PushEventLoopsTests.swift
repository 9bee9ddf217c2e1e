import CallpushCore
import Foundation
import Locking
import Logging
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
