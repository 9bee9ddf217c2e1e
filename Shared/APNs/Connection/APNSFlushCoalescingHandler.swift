import NIOCore

/// Sits between TLS and HTTP/2 and turns the flushes of one event-loop tick into one.
///
/// The connection handler flushes NIO's HTTP/2 handler after every request (so that DATA frames leave in
/// stream order); without this each of those would be a TLS record and a `write` system call. Deferring the
/// flush to a task on the event loop lets every request of the tick (dozens under load) share one TLS record
/// batch and one system call. Latency added: the rest of the current tick.
final class APNSFlushCoalescingHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    private var flushScheduled = false

    func flush(context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.flushScheduled = false
            context.flush()
        }
    }

    /// What is written goes out before the close (a GOAWAY, the last resets).
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if flushScheduled {
            flushScheduled = false
            context.flush()
        }
        context.close(mode: mode, promise: promise)
    }
}
