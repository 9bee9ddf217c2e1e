import CallContract
import CallTracing
import Foundation
import Hummingbird
import HummingbirdCore
import Kafka
import Logging
import ServiceLifecycle
import Locking
import NIOCore

/// Builds a dispatch instance from its configuration: the services in start order (shutdown runs
/// in reverse: the HTTP server stops before the view reader and the producer flushes).
/// `dispatch`'s `@main`, `callpush dev` and the tests call this same builder.
///
/// ```swift
/// let app = try DispatchApp(configuration: configuration, logger: logger)
/// let group = ServiceGroup(services: app.services, logger: logger)
/// // … once running: try await app.port() gives the bound port (useful with port 0)
/// ```
public final class DispatchApp: Sendable {
    /// Run these in one `ServiceGroup`, in this order.
    public let services: [any Service]
    /// The API handlers (for embedding the router elsewhere).
    public let api: DispatchAPI
    /// The status view the API serves.
    public let view: StatusView
    /// The Prometheus metrics (`/metrics`).
    public let metrics: DispatchMetrics
    /// The status webhooks, when any tenant has one.
    public let webhooks: WebhookSender?
    private let boundPort: BoundPort
    private let boundMetricsPort: BoundPort

    /// Builds the services; throws when the Kafka producer or ack-token signer cannot be created.
    /// `tracing`: traces rings and cancels, their status streams and webhooks (off by default).
    public init(configuration: DispatchConfiguration, logger: Logger, tracing: CallTracing = .off) throws {
        let metrics = DispatchMetrics()
        let view = StatusView(window: configuration.viewWindow, budgetBytes: configuration.viewBytes)
        let producer = try DispatchProducer(kafka: configuration.kafka, publishTimeout: configuration.publishTimeout,
                                            retryAfterSeconds: configuration.retryAfterSeconds, metrics: metrics, logger: logger)
        let webhooks = configuration.webhooks.isEmpty ? nil
            : WebhookSender(targets: configuration.webhooks, delivery: configuration.webhookDelivery, kafka: configuration.kafka,
                            statusTopic: configuration.statusTopic, view: view, metrics: metrics, tracing: tracing, logger: logger)
        let origin = DispatchAPI.makeOrigin(instanceID: configuration.instanceID)
        let reader = StatusViewReader(kafka: configuration.kafka, requestsTopic: configuration.requestsTopic,
                                      statusTopic: configuration.statusTopic, window: configuration.viewWindow, view: view,
                                      metrics: metrics, ownOrigin: origin, tracing: tracing, logger: logger)
        let reachability = KafkaReachability(kafka: configuration.kafka, interval: configuration.readinessProbeInterval, logger: logger)
        let api = try DispatchAPI(configuration: configuration, view: view, publisher: producer, metrics: metrics, logger: logger,
                                  origin: origin, tracing: tracing, isReady: { reader.isReady && producer.isHealthy && reachability.isReachable },
                                  isViewReady: { reader.isReady })
        self.api = api
        self.view = view
        self.webhooks = webhooks
        self.metrics = metrics
        let boundPort = BoundPort()
        self.boundPort = boundPort
        let metricsPort = BoundPort()
        self.boundMetricsPort = metricsPort
        let identity: TLSIdentity?
        do {
            identity = try configuration.tls.map { try TLSIdentity(files: $0, logger: logger) }
        } catch {
            throw DispatchConfigurationError("CALLPUSH_DISPATCH_TLS_CERT_FILE", "the certificate chain and key do not load: \(error)")
        }
        var services: [any Service] = [producer, reader, reachability]
        if let identity { services.append(identity) }
        if let webhooks { services.append(webhooks) }
        if let port = configuration.metricsPort {
            services.append(Self.server(router: api.metricsRouter(), host: configuration.metricsHost, port: port,
                                        configuration: configuration, bound: metricsPort, logger: logger))
        }
        services.append(Self.server(router: api.router(), host: configuration.host, port: configuration.port,
                                    configuration: configuration, tls: identity, bound: boundPort, logger: logger))
        self.services = services
    }

    /// The port the API listens on, once it does (waits until the server is running).
    public func port() async -> Int {
        await boundPort.wait()
    }

    /// The port `/metrics` listens on, once it does (never returns without a metrics listener).
    public func metricsPort() async -> Int {
        await boundMetricsPort.wait()
    }

    /// An HTTP server (HTTPS with `tls`) with dispatch's connection limits: at most
    /// `maxConnections` at once, idle (or header-less) connections closed after `idleTimeout`, and
    /// a response that says `Connection: close` closing the connection (an unread body is not drained).
    static func server(router: Router<DispatchRequestContext>, host: String, port: Int, configuration: DispatchConfiguration,
                       tls identity: TLSIdentity? = nil, bound: BoundPort, logger: Logger) -> some Service {
        let http1 = HTTP1Channel.Configuration(additionalChannelHandlers: [CloseAfterResponseHandler()],
                                               idleTimeout: TimeAmount(configuration.idleTimeout))
        let server: HTTPServerBuilder = identity.map { identity in
            HTTPServerBuilder { responder in ReloadingTLSChannel(base: HTTP1Channel(responder: responder, configuration: http1), identity: identity) }
        } ?? .http1(configuration: http1)
        return Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: "callpush-dispatch",
                                 availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections)),
            onServerRunning: { channel in bound.set(channel.localAddress?.port ?? port) },
            logger: logger)
    }
}

/// The listening port, set once the server runs; waiters are resumed then.
typealias BoundPort = OneShot<Int>
