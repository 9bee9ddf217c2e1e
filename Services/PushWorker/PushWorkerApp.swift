import APNs
import CallTracing
import CallpushCore
import FCM
import Logging
import NIOCore
import NIOPosix
import PushClientSupport
import ServiceLifecycle

/// Builds a push-worker process from its configuration: the services in start order (shutdown
/// runs in reverse: the worker drains before the APNs client closes). `push-worker`'s `@main`
/// calls it.
public enum PushWorkerApp {
    public static func services(_ environment: WorkerEnvironment, logger: Logger, tracing: CallTracing = .off) throws -> [any Service] {
        // The push connections' own event loops (`CALLPUSH_PUSH_EVENT_LOOPS`, 1): a run's pushes and
        // their answers then wake one thread, not one per connection; one loop took 2–16 % less CPU
        // per ring than two on two cores (docs/benchmarks.md, "Event loops"). Shut down last.
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: environment.pushEventLoops)
        do {
            let (apns, fcm) = try clients(environment, on: loops, logger: logger)
            let sender = PlatformPushSender(apns: apns.map(APNSPushSender.init(client:)), fcm: fcm.map(FCMPushSender.init(client:)))
            // The worker's runs go on the same loops: a run's pushes and answers then stay on its thread.
            let worker = try PushWorkerService(
                configuration: environment.worker, sender: sender,
                apps: Set(environment.apps.keys.map(\.rawValue)), androidApps: Set(environment.fcmApps.keys.map(\.rawValue)),
                ackTokens: try AckTokenSigner(secret: environment.ackSecret), logger: logger, tracing: tracing,
                executors: taskExecutors(on: loops))
            let http = WorkerHTTPServer.make(worker: worker, host: environment.httpHost, port: environment.httpPort, logger: logger)
            var services: [any Service] = [EventLoopGroupService(loops)]
            if let apns { services.append(apns) }
            if let fcm { services.append(fcm) }
            return services + [worker, http]
        } catch {
            try? loops.syncShutdownGracefully()
            throw error
        }
    }
}

extension PushWorkerApp {
    /// A task executor on each loop of `loops`, in the group's order.
    public static func taskExecutors(on loops: MultiThreadedEventLoopGroup) -> [any TaskExecutor] {
        loops.makeIterator().map { EventLoopTaskExecutor($0) }
    }

    /// A client per platform the apps file has credentials for (an app may have either or both),
    /// their connections on `loops`.
    static func clients(_ environment: WorkerEnvironment, on loops: any EventLoopGroup,
                        logger: Logger) throws -> (apns: APNSClient?, fcm: FCMClient?) {
        let apns = environment.apps.isEmpty ? nil
            : try APNSClient(configuration: environment.apns, apps: environment.apps, eventLoopGroup: loops, logger: logger)
        let fcm = environment.fcmApps.isEmpty ? nil
            : try FCMClient(configuration: environment.fcm, apps: environment.fcmApps, eventLoopGroup: loops, logger: logger)
        return (apns, fcm)
    }
}

/// Owns an event loop group for the life of the service group: started first, so it stops last,
/// after the clients whose connections run on it.
struct EventLoopGroupService: Service {
    let group: MultiThreadedEventLoopGroup

    init(_ group: MultiThreadedEventLoopGroup) {
        self.group = group
    }

    func run() async throws {
        // Until the service group shuts down, or is cancelled.
        try? await gracefulShutdown()
        try await group.shutdownGracefully()
    }
}
