import APNs
import CallpushCore
import Logging
import ServiceLifecycle

/// Builds a push-worker process from its configuration: the services in start order (shutdown
/// runs in reverse: the worker drains before the APNs client closes). `push-worker`'s `@main`
/// and the tests call this same builder.
public enum PushWorkerApp {
    public static func services(_ environment: WorkerEnvironment, logger: Logger) throws -> [any Service] {
        let client = try APNSClient(configuration: environment.apns, apps: environment.apps, logger: logger)
        let worker = try PushWorkerService(
            configuration: environment.worker, sender: APNsPushSender(client: client),
            apps: Set(environment.apps.keys.map(\.rawValue)),
            ackTokens: try AckTokenSigner(secret: environment.ackSecret), logger: logger)
        let http = WorkerHTTPServer.make(worker: worker, host: environment.httpHost, port: environment.httpPort, logger: logger)
        return [client, worker, http]
    }
}
