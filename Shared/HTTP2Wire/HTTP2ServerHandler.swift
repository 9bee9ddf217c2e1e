import NIOCore

/// A server's channel handler over an ``HTTP2Connection`` that writes what the framing produced once
/// per read burst: the bytes of a read go to the framing, the answers it queues meanwhile wait for
/// `channelReadComplete`, and an answer made outside a read (a delayed answer, a shutdown) is written
/// at once (`if !inReadLoop { flushOutput() }`). Both simulators serve their connections this way.
public protocol HTTP2ServerHandler: ChannelInboundHandler, AnyObject where InboundIn == ByteBuffer {
    /// The connection's framing.
    var framing: HTTP2Connection { get }
    /// Whether a read burst is under way (set by the `channelRead`/`channelReadComplete` below).
    var inReadLoop: Bool { get set }
    /// Writes what the framing produced and closes the connection when the framing is done.
    func flushOutput()
}

extension HTTP2ServerHandler {
    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inReadLoop = true
        framing.receive(unwrapInboundIn(data))
        if framing.wantsClose { flushOutput() }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        inReadLoop = false
        flushOutput()
        context.fireChannelReadComplete()
    }
}
