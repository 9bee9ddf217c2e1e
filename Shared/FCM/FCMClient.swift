import AsyncHTTPClient
import Foundation
import Locking
import Logging
import PushClientSupport
import NIOCore
import NIOPosix
import ServiceLifecycle

/// The FCM HTTP v1 client: high-priority data messages to Android devices over HTTP/2 (AsyncHTTPClient),
/// OAuth2 access tokens per service account, typed outcomes.
///
/// Use it directly (``send(_:)`` / ``shutdown()``) or run it in a `ServiceGroup`: on graceful shutdown it
/// stops taking messages, lets in-flight ones finish (bounded by `shutdownDrainTimeout`), then closes.
public final class FCMClient: Service, Sendable {
    struct AppEntry: Sendable {
        let sendURL: String
        let tokens: FCMAccessTokenProvider
    }

    private struct Lifecycle {
        var drain = InFlightDrain()
        var perSlot: [Int]
    }

    /// The largest answer body read (FCM's are a few hundred bytes).
    static let maximumAnswerBody = 64 * 1024

    /// The configuration in use.
    public let configuration: FCMClientConfiguration
    private let apps: [FCMAppID: AppEntry]
    private let providers: [FCMAccessTokenProvider]
    private let slots: [HTTPClient]
    let group: any EventLoopGroup  // internal: tests check which group a program gives it
    private let logger: Logger
    private let lifecycle: Locked<Lifecycle>

    /// Creates a client. No I/O happens until the first send (tokens and connections are obtained lazily).
    ///
    /// - Parameters:
    ///   - apps: app name → service account. Apps with the same service account share its access token.
    ///   - eventLoopGroup: defaults to NIO's shared singleton group.
    ///   - now: wall clock for the time put in JWT grants (`iat`/`exp`; injectable for tests).
    /// - Throws: ``FCMCredentialError`` naming the bad setting.
    public init(
        configuration: FCMClientConfiguration,
        apps: [FCMAppID: FCMApp],
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: FCMClient.defaultLoggerLabel),
        now wallClock: @escaping @Sendable () -> Date = { Date() }
    ) throws(FCMCredentialError) {
        try configuration.validate()
        guard !apps.isEmpty else { throw FCMCredentialError(.invalidConfiguration, "no FCM apps configured") }
        let httpConfiguration = try configuration.makeHTTPConfiguration()
        self.configuration = configuration
        self.group = eventLoopGroup
        self.logger = logger
        let slots = (0..<configuration.connections).map { _ in
            HTTPClient(eventLoopGroup: eventLoopGroup, configuration: httpConfiguration, backgroundActivityLogger: logger)
        }
        self.slots = slots
        self.lifecycle = Locked(Lifecycle(perSlot: Array(repeating: 0, count: slots.count)))
        let policy = FCMAccessTokenPolicy(
            minimumForcedRenewalInterval: configuration.minimumForcedTokenRenewalInterval,
            initialFailureBackoff: configuration.tokenFailureBackoff,
            maximumFailureBackoff: configuration.tokenFailureMaximumBackoff)
        var providers: [String: FCMAccessTokenProvider] = [:]
        var entries: [FCMAppID: AppEntry] = [:]
        for (appID, app) in apps.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let account = app.serviceAccount
            let provider = providers[account.identity] ?? FCMAccessTokenProvider(
                account: account, exchange: FCMTokenExchange(http: slots[0]), policy: policy,
                requestTimeout: configuration.tokenRequestTimeout, group: eventLoopGroup, logger: logger, wallClock: wallClock)
            providers[account.identity] = provider
            entries[appID] = AppEntry(sendURL: configuration.sendURL(project: account.projectID), tokens: provider)
        }
        self.apps = entries
        self.providers = Array(providers.values)
    }

    /// Sends one message and returns its one outcome. Never throws, never waits past the message's deadline or
    /// its timeout (default `requestTimeout`); renews the access token and retries once on a 401 within that time.
    public func send(_ message: FCMMessage) async -> FCMOutcome {
        let start = ContinuousClock.now
        func failure(_ error: FCMError, attempts: Int) -> FCMOutcome {
            FCMOutcome(error: error, latency: ContinuousClock.now - start, attempts: attempts)
        }
        guard let app = apps[message.app] else {
            return failure(FCMError(.unknownApp, "no service account configured for app \(message.app)"), attempts: 0)
        }
        let now = Date()
        do throws(FCMError) {
            try message.validate(now: now)
        } catch {
            return failure(error, attempts: 0)
        }
        let slot: Int
        switch beginSend() {
        case .success(let index): slot = index
        case .failure(let error): return failure(error, attempts: 0)
        }
        defer { endSend(slot: slot) }

        let timeout = message.timeout ?? configuration.requestTimeout
        let untilDeadline = Duration.milliseconds(Int64(message.deadline.timeIntervalSince(now) * 1000))
        let deadline = NIODeadline.now() + TimeAmount(min(timeout, untilDeadline))
        var attempts = 0
        var renewed = false
        while true {
            let token: FCMAccessToken
            switch await app.tokens.token(deadline: deadline) {
            case .success(let value): token = value
            case .failure(let error): return failure(error, attempts: attempts)
            }
            // The TTL is the time left now, not when the send began (a token wait or a renewal took some of it).
            guard let ttl = FCMMessage.ttl(until: message.deadline) else {
                return failure(FCMError(.deadlinePassed, "the message's deadline passed while waiting; not sent"), attempts: attempts)
            }
            var request = HTTPClientRequest(url: app.sendURL)
            request.method = .POST
            request.headers.add(name: "authorization", value: token.authorization)
            request.headers.add(name: "content-type", value: "application/json; charset=utf-8")
            request.body = .bytes(Self.encode(message, ttl: ttl))
            attempts += 1
            let status: Int
            let body: ByteBuffer
            let retryAfterHeader: String?
            do {
                let response = try await slots[slot].execute(request, deadline: deadline)
                status = Int(response.status.code)
                retryAfterHeader = response.headers.first(name: "retry-after")
                body = try await response.body.collect(upTo: Self.maximumAnswerBody)
            } catch {
                return failure(FCMTransportError.classify(error), attempts: attempts)
            }
            if (200..<300).contains(status) {
                let name = Self.messageName(body)
                return FCMOutcome(
                    status: status, errorCode: nil, rpcStatus: nil, errorMessage: nil, tokenViolation: false,
                    messageName: name, retryAfter: nil, latency: ContinuousClock.now - start, attempts: attempts)
            }
            let answer = FCMErrorBody(body.readableBytesView)
            if status == 401, answer?.errorCode != .thirdPartyAuthError, !renewed, NIODeadline.now() < deadline,
                app.tokens.reportRejected(generation: token.generation)
            {
                renewed = true
                continue
            }
            let outcome = FCMOutcome(
                status: status, errorCode: answer?.errorCode, rpcStatus: answer?.rpcStatus, errorMessage: answer?.message,
                tokenViolation: answer?.tokenViolation ?? false, messageName: nil,
                retryAfter: RetryAfter.parse(retryAfterHeader), latency: ContinuousClock.now - start, attempts: attempts)
            logger.debug(
                "FCM refused a message",
                metadata: ["fcm.status": "\(status)", "fcm.code": "\(outcome.code)",
                           "fcm.token": "\(FCMRegistrationToken.redacted(message.token))"])
            return outcome
        }
    }

    /// Stops taking messages, waits for in-flight ones (at most `shutdownDrainTimeout`), closes all connections.
    /// Idempotent.
    public func shutdown() async {
        _ = lifecycle.withLock { $0.drain.stopAccepting() }
        await lifecycle.waitForDrain(\.drain, timeout: configuration.shutdownDrainTimeout, on: group.any())
        let first = lifecycle.withLock { $0.drain.markShutDown() }
        guard first else { return }
        for provider in providers { provider.shutdown() }
        for slot in slots { try? await slot.shutdown() }
        logger.info("FCM client stopped")
    }

    /// `Service`: runs until graceful shutdown (or cancellation), then ``shutdown()``.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Token requests made so far, over all service accounts (tests: no renewal storm).
    public var tokenRequests: Int { providers.reduce(0) { $0 + $1.tokenRequests } }

    // MARK: - Internals

    private struct SendAnswer: Decodable {
        var name: String?
    }

    /// The `name` of a success answer: `{"name": "projects/…/messages/…"}` read directly when it is just that (FCM's
    /// answer, in any whitespace) with a plain string, otherwise through `JSONDecoder`.
    static func messageName(_ body: ByteBuffer) -> String? {
        let plain = body.withUnsafeReadableBytes { bytes -> String? in
            var index = 0
            func skipSpace() {
                while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                    index += 1
                }
            }
            func consume(_ text: StaticString) -> Bool {
                skipSpace()
                let count = text.utf8CodeUnitCount
                guard bytes.count - index >= count else { return false }
                for offset in 0..<count where bytes[index + offset] != text.utf8Start[offset] { return false }
                index += count
                return true
            }
            guard consume("{"), consume(#""name""#), consume(":"), consume("\"") else { return nil }
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 {
                index += 1
            }
            let end = index
            guard consume("\""), consume("}") else { return nil }
            skipSpace()
            guard index == bytes.count else { return nil }
            return String(validating: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        }
        return plain ?? (try? JSONDecoder().decode(SendAnswer.self, from: Data(body.readableBytesView)))?.name
    }

    /// `{"message":{"token":…,"data":{…},"android":{"priority":"HIGH","ttl":…,"collapse_key":…,"direct_boot_ok":true}}}`,
    /// written straight into the request's buffer (a `JSONEncoder` per message cost more than the rest of our side of a send).
    static func encode(_ message: FCMMessage, ttl: String) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(160 + message.token.utf8.count + message.collapseKey.utf8.count + message.dataSize + 8 * message.data.count)
        buffer.writeStaticString(#"{"message":{"token":"#)
        writeJSONString(message.token, to: &buffer)
        buffer.writeStaticString(#","data":{"#)
        var first = true
        for (key, value) in message.data {
            if !first { buffer.writeInteger(UInt8(ascii: ",")) }
            first = false
            writeJSONString(key, to: &buffer)
            buffer.writeInteger(UInt8(ascii: ":"))
            writeJSONString(value, to: &buffer)
        }
        buffer.writeStaticString(#"},"android":{"priority":"HIGH","ttl":"#)
        writeJSONString(ttl, to: &buffer)
        buffer.writeStaticString(#","collapse_key":"#)
        writeJSONString(message.collapseKey, to: &buffer)
        buffer.writeStaticString(#","direct_boot_ok":true}}}"#)
        return buffer
    }

    /// `text` as a JSON string: quotes, backslashes and control characters escaped, the rest as UTF-8.
    static func writeJSONString(_ text: String, to buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            var runStart = 0
            for (index, byte) in bytes.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                buffer.writeBytes(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[runStart..<index]))
                runStart = index + 1
                switch byte {
                case UInt8(ascii: "\""): buffer.writeStaticString(#"\""#)
                case UInt8(ascii: "\\"): buffer.writeStaticString(#"\\"#)
                case 0x0A: buffer.writeStaticString(#"\n"#)
                case 0x0D: buffer.writeStaticString(#"\r"#)
                case 0x09: buffer.writeStaticString(#"\t"#)
                default:
                    // Other control characters: \u00XX.
                    let low = byte & 0x0F
                    buffer.writeStaticString(#"\u00"#)
                    buffer.writeInteger(UInt8(ascii: "0") + byte >> 4)
                    buffer.writeInteger(low < 10 ? UInt8(ascii: "0") + low : UInt8(ascii: "a") + low - 10)
                }
            }
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[runStart...]))
        }
        buffer.writeInteger(UInt8(ascii: "\""))
    }

    /// Takes an in-flight slot on the least-loaded connection, or refuses (shutting down, too many in flight).
    private func beginSend() -> Result<Int, FCMError> {
        lifecycle.withLock { state in
            guard state.drain.accepting else { return .failure(FCMError(.shuttingDown, "the FCM client is shutting down")) }
            guard state.drain.inFlight < configuration.maxPendingRequests else {
                return .failure(FCMError(.queueFull, "\(state.drain.inFlight) sends already in flight"))
            }
            _ = state.drain.begin()
            var best = 0
            for index in state.perSlot.indices where state.perSlot[index] < state.perSlot[best] { best = index }
            state.perSlot[best] += 1
            return .success(best)
        }
    }

    private func endSend(slot: Int) {
        let waiter = lifecycle.withLock { state -> CheckedContinuation<Void, Never>? in
            state.perSlot[slot] -= 1
            return state.drain.end()
        }
        waiter?.resume()
    }
}
