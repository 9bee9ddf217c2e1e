import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// The worker's operations endpoints: `/metrics` (Prometheus text), `/healthz` (the process
/// runs), `/readyz` (it owns partitions and has its APNs credentials).
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
            Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "ok\n")))
        }
        router.get("/readyz") { _, _ -> Response in
            let ready = worker.isReady
            return Response(status: ready ? .ok : .serviceUnavailable, headers: [.contentType: "text/plain"],
                            body: .init(byteBuffer: ByteBuffer(string: ready ? "ready\n" : "not ready: no partitions assigned\n")))
        }
        return Application(router: router, configuration: .init(address: .hostname(host, port: port), serverName: "callpush-push-worker"),
                           onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
                           logger: logger)
    }
}
