import CallpushCore
import Foundation
import Locking
import Logging
import NIOPosix
import ServiceLifecycle
import Testing
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
