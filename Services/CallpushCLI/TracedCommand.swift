import CallTracing
import CallpushCore
import Logging
import ServiceLifecycle

/// A command's span exporter, when the `OTEL_*` variables configure one: started with the
/// command, flushed by ``finish()`` before it exits.
struct TracedCommand: Sendable {
    let tracing: CallTracing
    private let group: ServiceGroup
    private let running: Task<Void, Never>

    /// Nil when the variables leave tracing off; a usage error (exit 64) when they are wrong.
    init?(serviceName: String, environment: [String: String], logger: Logger) throws {
        let backend: TracingBackend?
        do {
            backend = try TracingEnvironment.load(serviceName: serviceName, environment: environment, logger: logger)
        } catch {
            throw CLIError.usage("\(error)")
        }
        guard let backend else { return nil }
        tracing = backend.tracing
        let group = ServiceGroup(services: [backend.service], logger: logger)
        self.group = group
        running = Task { try? await group.run() }
    }

    /// Exports what is left and stops.
    func finish() async {
        await group.triggerGracefulShutdown()
        await running.value
    }
}
