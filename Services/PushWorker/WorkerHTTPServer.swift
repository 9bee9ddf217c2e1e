import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// The worker's operations endpoints: `/metrics` (Prometheus text), `/readyz` and `/healthz`
/// (`WorkerHealth`: ready owns partitions and makes progress; live is not stuck for long). A 503
/// says why in its body.
public enum WorkerHTTPServer {
    /// - Parameter onRunning: told the bound port once listening (use port 0 to pick a free one).
    public static func make(worker: PushWorkerService, host: String, port: Int, logger: Logger,
                            onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) -> any Service {
        let router = Router()
        router.get("/metrics") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: .init(byteBuffer: ByteBuffer(string: worker.metrics.exposition())))
        }
        router.get("/healthz") { _, _ -> Response in
            let report = worker.healthReport
            return Response(status: report.live ? .ok : .serviceUnavailable, headers: [.contentType: "text/plain"],
                            body: .init(byteBuffer: ByteBuffer(string: report.live ? "ok\n" : "not live: \(report.reasons.joined(separator: "; "))\n")))
        }
        router.get("/readyz") { _, _ -> Response in
            let report = worker.healthReport
            return Response(status: report.ready ? .ok : .serviceUnavailable, headers: [.contentType: "text/plain"],
                            body: .init(byteBuffer: ByteBuffer(string: report.ready ? "ready\n" : "not ready: \(report.reasons.joined(separator: "; "))\n")))
        }
        return Application(router: router, configuration: .init(address: .hostname(host, port: port), serverName: "callpush-push-worker"),
                           onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
                           logger: logger)
    }
}
