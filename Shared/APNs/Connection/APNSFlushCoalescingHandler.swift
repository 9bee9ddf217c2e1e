import NIOCore

/// Sits between TLS and HTTP/2 and turns the many flushes of one event-loop tick into one.
///
/// Every request is written on its own stream channel and flushed on its own, which without this costs a
/// TLS record and a `write` system call per push. Deferring the flush to a task enqueued on the event loop
/// lets every request submitted in the same tick (typically dozens under load) share one TLS record batch
/// and one system call. Latency added: the rest of the current tick.
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

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if flushScheduled {
            flushScheduled = false
            context.flush()
        }
        context.close(mode: mode, promise: promise)
    }
}
