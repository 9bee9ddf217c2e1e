import CallTracing
import CallpushCore
import PushWorker

/// `push-worker`: configured from the environment (see `WorkerEnvironment`, and
/// `TracingEnvironment` for the `OTEL_*` variables), stops gracefully on SIGTERM / SIGINT.
/// Exit codes: 0 after a graceful stop, 2 for a configuration error, 1 otherwise.
@main
struct PushWorkerMain {
    static func main() async {
        await ServiceProgram.run(
            "push-worker",
            load: { try WorkerEnvironment.load() },
            warnings: { $0.warnings },
            isConfigurationError: { $0 is ConfigurationError },
            services: { environment, logger, tracing in
                try PushWorkerApp.services(environment, logger: logger, tracing: tracing)
            })
    }
}
