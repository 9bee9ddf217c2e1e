import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#endif

/// One client connection, handled at the HTTP/2 frame level (no child channel per stream): collects each
/// stream's request, answers it, counts streams for the GOAWAY / drop faults, authenticates requests (caching
/// the verified provider token), keeps the inbound flow-control windows open and announces SETTINGS.
/// Lives in the connection pipeline right after the HTTP/2 handler; every method runs on the connection's
/// event loop.
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// What happens to a newly opened stream.
    enum StreamAdmission {
        case process
        case refuse
        case connectionDropped
    }

    /// How a request authenticated.
    enum Authentication: Equatable {
        case token(keyID: String)
        case certificate
        case unauthenticated
    }

    /// One open stream: its request while it arrives, then whether its answer is pending.
    struct StreamState {
        /// The faults in force when the stream opened (they apply from the next stream).
        var faults: APNsSimulatorFaults
        var headers: HPACKHeaders?
        var body: ByteBuffer?
        var bodyLength = 0
        var requestComplete = false
    }

    /// Connection-level inbound window the simulator keeps open (WINDOW_UPDATE when half is used).
    static let connectionWindow = 1 << 24
    /// Per-stream inbound window, announced in SETTINGS.
    static let streamWindow = 1 << 20

    let id: Int
    let core: SimulatorCore
    var context: ChannelHandlerContext?
    var streams: [HTTP2StreamID: StreamState] = [:]
    var needsFlush = false
    var inReadLoop = false
    /// Highest stream id the client opened (processed or refused): a HEADERS above it opens a stream.
    var lastOpenedStreamID = HTTP2StreamID(0)
    private var streamsReceived = 0
    private var highestStreamID = HTTP2StreamID(0)
    private var goAwayLastStreamID: HTTP2StreamID?
    private var dropped = false
    private var cachedAuthorization: String?
    private var cachedToken: ProviderToken?
    private var firstKeyID: String?
    private var clientCertificatePresent: Bool?
    private var announcedMaxStreams: Int
    private var rampedUp: Bool

    init(id: Int, core: SimulatorCore, initialMaxStreams: Int, rampedUp: Bool) {
        self.id = id
        self.core = core
        self.announcedMaxStreams = initialMaxStreams
        self.rampedUp = rampedUp
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        streams.removeAll()
        core.state.withLock { $0.closeConnection(id) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A stream error (e.g. a stream opened after our GOAWAY) only concerns that stream: NIO has already
        // reset it. TLS and connection-level HTTP/2 errors end the connection; nothing to answer.
        if error is NIOHTTP2Errors.StreamError { return }
        core.logger.debug("connection error", metadata: ["apns.connection": "\(id)", "error": "\(error)"])
        context.close(promise: nil)
    }

    // MARK: Admission

    /// Decides the fate of every stream the client opens (fault counters, GOAWAY, drop).
    func streamOpened(_ streamID: HTTP2StreamID, faults: APNsSimulatorFaults) -> StreamAdmission {
        if dropped { return .refuse }
        if let last = goAwayLastStreamID, streamID > last { return .refuse }
        streamsReceived += 1
        highestStreamID = max(highestStreamID, streamID)
        if let limit = faults.dropConnectionAfterStreams, streamsReceived > limit {
            drop()
            return .connectionDropped
        }
        streams[streamID] = StreamState(faults: faults)
        if let limit = faults.goAwayAfterStreams, streamsReceived >= limit, goAwayLastStreamID == nil {
            sendGoAway(lastStreamID: streamID, reason: faults.goAwayReason)
        }
        return .process
    }

    /// A stream ended (answered, reset by the client, or the connection closed): after a GOAWAY, the
    /// connection closes once its last admitted stream is done.
    func streamClosed(_ streamID: HTTP2StreamID) {
        guard streams.removeValue(forKey: streamID) != nil else { return }
        if goAwayLastStreamID != nil, streams.isEmpty, let context {
            // Let the last response leave before closing.
            context.eventLoop.assumeIsolated().execute {
                context.close(promise: nil)
            }
        }
    }

    /// GOAWAY with NO_ERROR and `{"reason": …}` debug data; streams up to `lastStreamID` still get answers.
    func sendGoAway(lastStreamID: HTTP2StreamID? = nil, reason: String) {
        guard let context, goAwayLastStreamID == nil else { return }
        let last = lastStreamID ?? highestStreamID
        goAwayLastStreamID = last
        let json = (try? JSONSerialization.data(withJSONObject: ["reason": reason])) ?? Data(#"{"reason":"Shutdown"}"#.utf8)
        var debug = context.channel.allocator.buffer(capacity: json.count)
        debug.writeBytes(json)
        let frame = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: last, errorCode: .noError, opaqueData: debug))
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        core.count { $0.goAwaysSent += 1 }
        if streams.isEmpty {
            context.eventLoop.assumeIsolated().execute { context.close(promise: nil) }
        }
    }

    /// Abrupt close: TCP RST, no GOAWAY.
    func drop() {
        guard let context, !dropped else { return }
        dropped = true
        core.count { $0.connectionsDropped += 1 }
        // SO_LINGER 0 turns close() into a TCP reset.
        if let socket = context.channel as? any SocketOptionProvider {
            socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        } else {
            context.close(promise: nil)
        }
    }

    /// Sends SETTINGS with a new MAX_CONCURRENT_STREAMS (only once the connection is ramped up).
    func announceMaxConcurrentStreams(_ limit: Int) {
        guard rampedUp, limit != announcedMaxStreams, let context else { return }
        announcedMaxStreams = limit
        let frame = HTTP2Frame(
            streamID: .rootStream,
            payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: limit)]))
        )
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
    }

    /// After the first authenticated success with ramp-up on, raise MAX_CONCURRENT_STREAMS from 1.
    func authenticatedRequestSucceeded() {
        guard !rampedUp else { return }
        rampedUp = true
        let limit = core.maxConcurrentStreams(core.faults)
        announcedMaxStreams = 0
        announceMaxConcurrentStreams(limit)
    }

    // MARK: Authentication

    /// Token auth (JWT), or certificate auth, or nothing when allowed.
    func authenticate(_ head: PushRequestHead, now: Date) -> Result<Authentication, APNsReason> {
        guard let authorization = head.value("authorization") else {
            if hasClientCertificate { return .success(.certificate) }
            if core.allowUnauthenticated { return .success(.unauthenticated) }
            return .failure(.missingProviderToken)
        }
        let token: ProviderToken
        let alreadyAccepted: Bool
        if authorization == cachedAuthorization, let cachedToken {
            // The same bytes as the last token this connection accepted: no signature check, no shared state
            // (reusing an accepted token is always fine); only its age is checked again.
            token = cachedToken
            alreadyAccepted = true
        } else {
            switch ProviderToken.verify(authorization: authorization[...], keys: core.keys) {
            case .failure(let reason):
                return .failure(reason)
            case .success(let verified):
                token = verified
                alreadyAccepted = false
            }
        }
        let age = now.timeIntervalSince1970 - Double(token.issuedAt)
        if age > 3600 { return .failure(.expiredProviderToken) }
        if age < -300 { return .failure(.invalidProviderToken) }
        if alreadyAccepted { return .success(.token(keyID: token.keyID)) }
        if let firstKeyID, firstKeyID != token.keyID { return .failure(.unrelatedKeyIdInToken) }
        if let refusal = core.state.withLock({ $0.checkTokenUpdate(token, connection: id, now: now) }) {
            return .failure(refusal)
        }
        firstKeyID = token.keyID
        cachedAuthorization = authorization
        cachedToken = token
        return .success(.token(keyID: token.keyID))
    }

    private var hasClientCertificate: Bool {
        if let clientCertificatePresent { return clientCertificatePresent }
        let present: Bool
        if let context, let tls = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self) {
            present = tls.peerCertificate != nil
        } else {
            present = false
        }
        clientCertificatePresent = present
        return present
    }
}
