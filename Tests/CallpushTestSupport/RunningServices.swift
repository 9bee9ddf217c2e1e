import Logging
import ServiceLifecycle

/// Runs `services` in a `ServiceGroup` around `body`, then shuts the group down gracefully and
/// waits for it, whether `body` returned or threw.
public func withRunning<T>(_ services: [any Service], logger: Logger, _ body: () async throws -> T) async throws -> T {
    let group = ServiceGroup(services: services, logger: logger)
    let running = Task { try await group.run() }
    do {
        let result = try await body()
        await group.triggerGracefulShutdown()
        _ = await running.result
        return result
    } catch {
        await group.triggerGracefulShutdown()
        _ = await running.result
        throw error
    }
}
