import CRdKafka
import Logging
import Synchronization
import Locking

/// Receives the callbacks librdkafka makes while a client's queues are served.
///
/// They run on the client's own poll thread (we set `log.queue=true` and serve the main
/// queue ourselves), never on internal librdkafka threads.
protocol RDKafkaClientDelegate: AnyObject, Sendable {
    /// A group rebalance (consumer): assign or revoke its partitions.
    func rebalance(_ event: RDKafkaRebalance)
}

/// Per-client state that librdkafka's C callbacks reach through the `opaque` pointer.
///
/// `@unchecked Sendable`: `delegate` is assigned once, before the poll thread that serves
/// callbacks starts, and never changed; the fatal error is behind a `Mutex`.
final class RDKafkaClientContext: @unchecked Sendable {
    let logger: Logger
    weak var delegate: (any RDKafkaClientDelegate)?
    private let fatal = Locked<KafkaError?>(nil)
    /// Fires on a fatal error (and when the owner stops): ends the owner's `run()`.
    let stopSignal = OneShotSignal()

    init(logger: Logger) {
        self.logger = logger
    }

    var fatalError: KafkaError? { fatal.withLock { $0 } }

    func recordFatal(_ error: KafkaError) {
        fatal.withLock { if $0 == nil { $0 = error } }
        stopSignal.finish()
    }
}

/// An owned `rd_kafka_t` handle with log and error callbacks routed to swift-log.
///
/// `@unchecked Sendable`: librdkafka handles are thread-safe; `destroy` happens once, after
/// every user of the handle is done (ensured by the owning producer/consumer state machine).
final class RDKafkaClient: @unchecked Sendable {
    let handle: OpaquePointer
    let context: RDKafkaClientContext
    private let retainedContext: Unmanaged<RDKafkaClientContext>
    /// The resolved `sasl.username` / `sasl.password` ("" when not set), for ``wakeBrokerThreads()``.
    private let saslCredentials: (username: String, password: String)

    private init(
        handle: OpaquePointer,
        context: RDKafkaClientContext,
        retained: Unmanaged<RDKafkaClientContext>,
        saslCredentials: (username: String, password: String)
    ) {
        self.handle = handle
        self.context = context
        self.retainedContext = retained
        self.saslCredentials = saslCredentials
    }

    /// Wakes every broker thread of this client, so that each decides again whether to fetch.
    ///
    /// librdkafka 2.0.2 re-evaluates a partition's fetch only when its broker thread wakes: after a
    /// resume, or after the consumer queue drained below `queued.min.messages`, a broker thread
    /// that found nothing to fetch sleeps up to 1 s first (docs/kafka.md, "Fetch wake-up"). The
    /// public API has no wake-up call; `rd_kafka_sasl_set_credentials` is the one call that only
    /// stores two strings and then sends every broker thread a wake-up op. It is given the
    /// credentials the client was created with, so nothing changes but the wake-up.
    func wakeBrokerThreads() {
        if let error = rd_kafka_sasl_set_credentials(handle, saslCredentials.username, saslCredentials.password) {
            rd_kafka_error_destroy(error)
        }
    }

    /// Creates a client of `type` from `properties` (values resolved per ``KafkaConfiguration``'s scheme).
    static func create(
        type: rd_kafka_type_t,
        properties: [String: String],
        logger: Logger,
        delegate: (any RDKafkaClientDelegate)?,
        servesMainQueue: Bool = true
    ) throws(KafkaError) -> RDKafkaClient {
        guard let conf = rd_kafka_conf_new() else {
            throw KafkaError(code: .configuration, message: "rd_kafka_conf_new failed")
        }
        var ownsConf = true
        defer { if ownsConf { rd_kafka_conf_destroy(conf) } }

        var all = properties
        var saslCredentials = (username: "", password: "")
        // Clients with a poll thread get logs on it; others (the mock cluster's handle, which
        // nobody polls) log directly from librdkafka's threads (the callback is thread-safe).
        all["log.queue"] = servesMainQueue ? "true" : "false"
        for key in all.keys.sorted() {
            let value = try KafkaConfiguration.resolve(key: key, value: all[key] ?? "")
            try setProperty(conf, key: key, value: value)
            if key == "sasl.username" { saslCredentials.username = value }
            if key == "sasl.password" { saslCredentials.password = value }
        }

        let context = RDKafkaClientContext(logger: logger)
        context.delegate = delegate
        let retained = Unmanaged.passRetained(context)
        rd_kafka_conf_set_opaque(conf, retained.toOpaque())
        rd_kafka_conf_set_log_cb(conf, rdLogCallback)
        rd_kafka_conf_set_error_cb(conf, rdErrorCallback)
        if type == RD_KAFKA_PRODUCER {
            rd_kafka_conf_set_dr_msg_cb(conf, rdDeliveryCallback)
        } else {
            rd_kafka_conf_set_rebalance_cb(conf, rdRebalanceCallback)
        }

        var errstr = [CChar](repeating: 0, count: 512)
        guard let handle = rd_kafka_new(type, conf, &errstr, errstr.count) else {
            retained.release()
            throw KafkaError(code: .configuration, message: "rd_kafka_new failed: \(String(errorBuffer: errstr))")
        }
        ownsConf = false
        // Logs go to the main queue (served by our poll thread; for consumers it is
        // forwarded to the consumer queue by rd_kafka_poll_set_consumer).
        if servesMainQueue { rd_kafka_set_log_queue(handle, nil) }
        return RDKafkaClient(handle: handle, context: context, retained: retained, saslCredentials: saslCredentials)
    }

    /// Sets one property; the error names the key (never the value, which may be secret).
    static func setProperty(_ conf: OpaquePointer, key: String, value: String) throws(KafkaError) {
        var errstr = [CChar](repeating: 0, count: 512)
        let result = rd_kafka_conf_set(conf, key, value, &errstr, errstr.count)
        guard result == RD_KAFKA_CONF_OK else {
            throw KafkaError(
                code: .configuration,
                message: "property '\(key)' rejected: \(String(errorBuffer: errstr))"
            )
        }
    }

    /// The fatal error raised on this client, if any (`rd_kafka_fatal_error`).
    var fatalError: KafkaError? {
        if let known = context.fatalError { return known }
        var errstr = [CChar](repeating: 0, count: 512)
        let err = rd_kafka_fatal_error(handle, &errstr, errstr.count)
        guard err != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        let error = KafkaError(rdKafka: err, context: "fatal error: \(String(errorBuffer: errstr))", isFatal: true)
        context.recordFatal(error)
        return error
    }

    /// The effective value of a configuration property (as librdkafka holds it).
    func configValue(_ key: String) -> String? {
        guard let conf = rd_kafka_conf(handle) else { return nil }
        var size = 0
        guard rd_kafka_conf_get(conf, key, nil, &size) == RD_KAFKA_CONF_OK, size > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: size)
        guard rd_kafka_conf_get(conf, key, &buffer, &size) == RD_KAFKA_CONF_OK else { return nil }
        return String(errorBuffer: buffer)
    }

    /// Destroys the handle on a dedicated thread; gives up waiting after `deadline`
    /// (librdkafka 2.0.2 can hang in destroy after a broker restart) and logs it.
    func destroy(deadline: Duration, name: String) async {
        let handle = UncheckedHandle(handle)
        let retained = UncheckedRetained(retainedContext)
        let finished = await BlockingCall.run("\(name).destroy", deadline: deadline) {
            rd_kafka_destroy(handle.pointer)
            // Callbacks can no longer run: safe to release the context.
            retained.value.release()
            return true
        }
        if finished == nil {
            context.logger.error(
                "rd_kafka_destroy did not finish in time; abandoning its thread",
                metadata: ["kafka.client": "\(name)", "kafka.deadline": "\(deadline)"]
            )
        }
    }
}

/// Sends a C pointer to a dedicated thread. `@unchecked Sendable`: librdkafka handles are thread-safe.
struct UncheckedHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

/// Sends an `Unmanaged` to the destroy thread. `@unchecked Sendable`: it is released exactly once there.
private struct UncheckedRetained: @unchecked Sendable {
    let value: Unmanaged<RDKafkaClientContext>
    init(_ value: Unmanaged<RDKafkaClientContext>) { self.value = value }
}

private func context(of rk: OpaquePointer?) -> RDKafkaClientContext? {
    guard let rk, let opaque = rd_kafka_opaque(rk) else { return nil }
    return Unmanaged<RDKafkaClientContext>.fromOpaque(opaque).takeUnretainedValue()
}

private let rdLogCallback: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Void = {
    rk, level, facility, buffer in
    guard let context = context(of: rk) else { return }
    let swiftLevel: Logger.Level
    switch level {
    case 0...2: swiftLevel = .critical
    case 3: swiftLevel = .error
    case 4: swiftLevel = .warning
    case 5, 6: swiftLevel = .info
    default: swiftLevel = .debug
    }
    context.logger.log(
        level: swiftLevel,
        "librdkafka",
        metadata: [
            "kafka.facility": "\(facility.map { String(cString: $0) } ?? "")",
            "kafka.log": "\(buffer.map { String(cString: $0) } ?? "")",
        ]
    )
}

private let rdErrorCallback: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Void = {
    rk, code, reason, _ in
    guard let rk, let context = context(of: rk) else { return }
    let err = rd_kafka_resp_err_t(rawValue: code)
    let reasonText = reason.map { String(cString: $0) } ?? ""
    if err == RD_KAFKA_RESP_ERR__FATAL {
        var errstr = [CChar](repeating: 0, count: 512)
        let underlying = rd_kafka_fatal_error(rk, &errstr, errstr.count)
        let error = KafkaError(rdKafka: underlying, context: "fatal error: \(String(errorBuffer: errstr))", isFatal: true)
        context.recordFatal(error)
        context.logger.critical("kafka client fatal error", metadata: ["kafka.error": "\(error)"])
    } else {
        context.logger.warning(
            "kafka client error",
            metadata: ["kafka.error.code": "\(String(cString: rd_kafka_err2name(err)))", "kafka.error.reason": "\(reasonText)"]
        )
    }
}

private let rdDeliveryCallback: @convention(c) (OpaquePointer?, UnsafePointer<rd_kafka_message_t>?, UnsafeMutableRawPointer?) -> Void = {
    _, message, _ in
    // The message's opaque leads straight to its batch: no lookup in the hot path.
    guard let message else { return }
    DeliveryBatch.deliver(message)
}

private let rdRebalanceCallback: @convention(c) (
    OpaquePointer?, rd_kafka_resp_err_t, UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?, UnsafeMutableRawPointer?
) -> Void = { rk, err, partitions, _ in
    guard let rk, let partitions else { return }
    guard let delegate = context(of: rk)?.delegate else {
        // No delegate (shutting down): keep librdkafka's state consistent.
        if err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS { rd_kafka_assign(rk, partitions) } else { rd_kafka_assign(rk, nil) }
        return
    }
    delegate.rebalance(RDKafkaRebalance(rk, err, partitions))
}

extension String {
    /// Decodes a NUL-terminated C error buffer.
    init(errorBuffer: [CChar]) {
        self.init(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
