import CallTracing
import DispatchService

/// `dispatch`: configured from the environment (see docs/dispatch.md; docs/tracing.md for the
/// `OTEL_*` variables), stops gracefully on SIGTERM / SIGINT. Exit codes: 0 after a graceful
/// stop, 2 for a configuration error, 1 otherwise.
@main
struct DispatchMain {
    static func main() async {
        await ServiceProgram.run(
            "dispatch",
            load: { try DispatchEnvironment.load() },
            warnings: { $0.warnings },
            isConfigurationError: { $0 is DispatchConfigurationError },
            services: { configuration, logger, tracing in
                try DispatchApp(configuration: configuration, logger: logger, tracing: tracing).services
            })
    }
}
