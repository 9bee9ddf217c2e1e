import HTTP2Wire
import NIOCore
import NIOHPACK

/// One HTTP/2 connection (negotiated by ALPN), served by ``HTTP2Connection`` in the server role straight
/// after TLS, as the APNs simulator does: each stream's request is collected and answered by
/// ``FCMSimulatorCore/answer(_:)`` on the event loop, answers written once per read burst.
///
/// Hummingbird's HTTP/2 (NIOHTTP2 with a child channel, an async channel and a task per stream) spent many
/// times nghttpd's time per request; HTTP/1.1 stays with Hummingbird. Every method runs on the
/// connection's event loop.
final class FCMHTTP2Handler: HTTP2ServerHandler, HTTP2ConnectionDelegate {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// FCM's limit of concurrent streams per connection.
    static let maxConcurrentStreams = 100
    static let streamWindow = 1 << 20
    static let connectionWindow = 1 << 24
    static let maxHeaderListSize = 16_384

    private struct Stream {
        var headers: HPACKHeaders
        var body: [UInt8] = []
        var tooLarge = false
        var complete = false
    }

    private let core: FCMSimulatorCore
    let framing: HTTP2Connection
    private var context: ChannelHandlerContext?
    private var streams: [UInt32: Stream] = [:]
    var inReadLoop = false
    private var closing = false
    private var goAwaySent = false

    init(core: FCMSimulatorCore) {
        self.core = core
        self.framing = HTTP2Connection(
            allocator: ByteBufferAllocator(), settings: [(.maxConcurrentStreams, Self.maxConcurrentStreams)],
            streamWindow: Self.streamWindow, connectionWindow: Self.connectionWindow, maxHeaderListSize: Self.maxHeaderListSize)
        self.framing.delegate = self
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { flushOutput() }  // the server preface
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        closing = true
        streams.removeAll()
        framing.connectionClosed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS and socket errors end the connection; HTTP/2 errors are the framing's (RST_STREAM or GOAWAY).
        core.logger.debug("FCM simulator connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    /// Hummingbird's graceful shutdown asks every connection to quiesce.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            shutDownGracefully()
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Graceful shutdown: GOAWAY, the streams in flight are answered, then the connection closes.
    func shutDownGracefully() {
        guard context != nil, !goAwaySent, !closing else { return }
        goAwaySent = true
        framing.goAway()
        if !inReadLoop { flushOutput() }
    }

    // MARK: HTTP2ConnectionDelegate

    func http2StreamOpened(_ stream: UInt32, headers: HPACKHeaders) -> HTTP2Admission {
        streams[stream] = Stream(headers: headers)
        return .accept
    }

    func http2Data(_ data: ByteBuffer, stream: UInt32) {
        guard let index = streams.index(forKey: stream), !streams.values[index].complete, !streams.values[index].tooLarge else { return }
        if streams.values[index].body.count + data.readableBytes > core.configuration.maxBodyBytes {
            streams.values[index].tooLarge = true
            streams.values[index].body = []
        } else {
            streams.values[index].body.append(contentsOf: data.readableBytesView)
        }
    }

    func http2RemoteEnded(_ stream: UInt32) {
        guard let index = streams.index(forKey: stream), !streams.values[index].complete else { return }
        streams.values[index].complete = true
        let request = streams.values[index]
        streams.values[index].body = []
        let answer = core.answer(FCMSimulatorRequest(
            method: request.headers.first(name: ":method") ?? "", path: Self.path(request.headers.first(name: ":path") ?? ""),
            authority: request.headers.first(name: ":authority"), authorization: request.headers.first(name: "authorization"),
            body: request.tooLarge ? nil : request.body, httpVersion: "HTTP/2"))
        framing.answer(stream: stream, after: answer.delay.map { TimeAmount($0) } ?? .zero, context: context) { self.write(answer, stream: stream) }
    }

    func http2StreamClosed(_ stream: UInt32, _ end: HTTP2StreamEnd) {
        streams.removeValue(forKey: stream)
    }

    // MARK: Writing

    private func write(_ answer: FCMSimulatorAnswer, stream: UInt32) {
        var headers: [(name: String, value: String)] = [(":status", String(answer.status)), ("content-type", "application/json; charset=UTF-8")]
        if let seconds = answer.retryAfterSeconds { headers.append(("retry-after", String(seconds))) }
        framing.send(stream: stream, headers: headers, body: ByteBuffer(string: answer.body))
        if !inReadLoop { flushOutput() }
    }

    /// Writes what the framing produced; closes once it is written when the framing is done.
    func flushOutput() {
        guard let context, !closing else { return }
        closing = framing.writeOutput(to: context)
    }

    /// The path without its query.
    private static func path(_ target: String) -> String {
        target.utf8.firstIndex(of: UInt8(ascii: "?")).map { String(target[..<$0]) } ?? target
    }
}
