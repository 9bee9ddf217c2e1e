import Foundation
import HTTP2Wire
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#endif

/// One client connection: its HTTP/2 protocol (``HTTP2Connection`` in the server role, right after TLS in the pipeline), each
/// stream's request collected and answered, streams counted for the GOAWAY / drop faults, requests
/// authenticated (caching the verified provider token) and MAX_CONCURRENT_STREAMS announced.
/// Every method runs on the connection's event loop.
final class SimulatorConnectionHandler: HTTP2ServerHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

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
        var faults: APNSSimulatorFaults
        var headers: HPACKHeaders?
        var body: ByteBuffer?
        var bodyLength = 0
        var requestComplete = false
    }

    /// Connection-level inbound window the simulator keeps open (WINDOW_UPDATE when half is used).
    static let connectionWindow = 1 << 24
    /// Per-stream inbound window, announced in SETTINGS.
    static let streamWindow = 1 << 20
    /// SETTINGS_MAX_HEADER_LIST_SIZE announced.
    static let maxHeaderListSize = 8192

    let id: Int
    let core: SimulatorCore
    let framing: HTTP2Connection
    var context: ChannelHandlerContext?
    var streams: [UInt32: StreamState] = [:]
    var inReadLoop = false
    /// Made-up ids and fault sampling.
    var random = FastRandom()
    private var streamsReceived = 0
    private var highestStreamID: UInt32 = 0
    private var goAwaySent = false
    private var dropped = false
    var closing = false
    private var cachedAuthorization: String?
    private var cachedToken: ProviderToken?
    /// `bearer <redacted kid=…>` for the last key id recorded on this connection.
    private var redactedAuthorizationCache: (keyID: String, text: String)?
    private var firstKeyID: String?
    private var clientCertificatePresent: Bool?
    private var announcedMaxStreams: Int
    private var rampedUp: Bool
    /// The faults as of `faultsVersion` (re-read from the shared state only after a change).
    private var cachedFaults: (version: Int, faults: APNSSimulatorFaults)?
    /// Accepted pushes not yet in the shared record: added under its lock once per read burst, before the answers
    /// are written (a client that got its 200 finds its push recorded), instead of once per push.
    var pendingRecords: [StoredPush] = []

    init(id: Int, core: SimulatorCore, initialMaxStreams: Int, rampedUp: Bool) {
        self.id = id
        self.core = core
        self.announcedMaxStreams = initialMaxStreams
        self.rampedUp = rampedUp
        self.framing = HTTP2Connection(
            allocator: ByteBufferAllocator(), settings: [(.maxConcurrentStreams, initialMaxStreams)],
            streamWindow: Self.streamWindow, connectionWindow: Self.connectionWindow, maxHeaderListSize: Self.maxHeaderListSize
        )
        self.framing.delegate = self
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { flushOutput() }
    }

    func channelActive(context: ChannelHandlerContext) {
        flushOutput()  // the server preface (TLS sends it once the handshake is done)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        commitRecords()
        self.context = nil
    }

    /// The faults in force (the version is read first: a change racing with this read is seen next time).
    func currentFaults() -> APNSSimulatorFaults {
        let version = core.faultsVersion.load(ordering: .acquiring)
        if let cachedFaults, cachedFaults.version == version { return cachedFaults.faults }
        let faults = core.faults
        cachedFaults = (version, faults)
        return faults
    }

    /// Moves the pending accepted pushes into the shared record.
    func commitRecords() {
        guard !pendingRecords.isEmpty else { return }
        core.state.withLock { state in
            for record in pendingRecords { state.record(record) }
        }
        pendingRecords.removeAll(keepingCapacity: true)
    }

    func channelInactive(context: ChannelHandlerContext) {
        commitRecords()
        closing = true
        streams.removeAll()
        core.state.withLock { $0.closeConnection(id) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS and socket errors end the connection; nothing to answer. (HTTP/2 errors are the framing's: it
        // resets the stream or sends GOAWAY.)
        core.logger.debug("connection error", metadata: ["apns.connection": "\(id)", "error": "\(error)"])
        context.close(promise: nil)
    }

    // MARK: Admission

    /// Decides the fate of every stream the client opens (fault counters, GOAWAY, drop).
    func streamOpened(_ streamID: UInt32, faults: APNSSimulatorFaults) -> HTTP2Admission {
        if dropped { return .ignore }
        streamsReceived += 1
        highestStreamID = max(highestStreamID, streamID)
        if let limit = faults.dropConnectionAfterStreams, streamsReceived > limit {
            drop()
            return .ignore
        }
        if let reason = faults.rejectConnections {
            if !goAwaySent { core.count { $0.connectionsRejected += 1 } }
            sendGoAway(lastStreamID: 0, reason: reason)
            return .ignore
        }
        if faults.refusedStreamRate > 0, Double.random(in: 0..<1, using: &random) < faults.refusedStreamRate {
            core.count { $0.streamsRefused += 1 }
            return .refuse
        }
        streams[streamID] = StreamState(faults: faults)
        if let limit = faults.goAwayAfterStreams, streamsReceived >= limit, !goAwaySent {
            sendGoAway(lastStreamID: streamID, reason: faults.goAwayReason)
        }
        return .accept
    }

    /// GOAWAY with NO_ERROR and `{"reason": …}` debug data; streams up to `lastStreamID` still get answers, then
    /// the connection closes.
    func sendGoAway(lastStreamID: UInt32? = nil, reason: String) {
        guard context != nil, !goAwaySent, !dropped else { return }
        goAwaySent = true
        let json = (try? JSONSerialization.data(withJSONObject: ["reason": reason])) ?? Data(#"{"reason":"Shutdown"}"#.utf8)
        framing.goAway(lastStreamID: lastStreamID ?? highestStreamID, code: .noError, debugData: Array(json))
        core.count { $0.goAwaysSent += 1 }
        if !inReadLoop { flushOutput() }
    }

    /// Abrupt close: TCP RST, no GOAWAY.
    func drop() {
        guard let context, !dropped else { return }
        dropped = true
        closing = true
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
        guard rampedUp, limit != announcedMaxStreams, context != nil, !closing else { return }
        announcedMaxStreams = limit
        framing.announceMaxConcurrentStreams(limit)
        if !inReadLoop { flushOutput() }
    }

    /// After the first authenticated success with ramp-up on, raise MAX_CONCURRENT_STREAMS from 1.
    func authenticatedRequestSucceeded() {
        guard !rampedUp else { return }
        rampedUp = true
        let limit = core.maxConcurrentStreams(currentFaults())
        announcedMaxStreams = 0
        announceMaxConcurrentStreams(limit)
    }

    // MARK: Authentication

    /// Token auth (JWT), or certificate auth, or nothing when allowed.
    func authenticate(_ head: PushRequestHead, now: Date) -> Result<Authentication, APNSReason> {
        guard let authorization = head.authorization else {
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
        if let firstKeyID, firstKeyID != token.keyID { return .failure(.unrelatedKeyIDInToken) }
        if let refusal = core.state.withLock({ $0.checkTokenUpdate(token, connection: id, now: now) }) {
            return .failure(refusal)
        }
        firstKeyID = token.keyID
        cachedAuthorization = authorization
        cachedToken = token
        return .success(.token(keyID: token.keyID))
    }

    /// What recorded pushes show instead of the token (the same string for every push of a key).
    func redactedAuthorization(keyID: String) -> String {
        if let cached = redactedAuthorizationCache, cached.keyID == keyID { return cached.text }
        let text = "bearer <redacted kid=\(keyID)>"
        redactedAuthorizationCache = (keyID, text)
        return text
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
