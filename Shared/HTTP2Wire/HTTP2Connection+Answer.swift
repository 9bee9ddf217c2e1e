import NIOCore

extension HTTP2Connection {
    /// Runs `write` (a server's answer on `stream`) now, or after `delay` on the connection's event
    /// loop. A delayed answer is written only if the stream is still open then: the client may have
    /// reset it (its deadline passed) or the connection may be gone. Call on the event loop.
    public func answer(stream: UInt32, after delay: TimeAmount, context: ChannelHandlerContext?, _ write: @escaping () -> Void) {
        guard delay > .zero, let context else { return write() }
        context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
            guard self.isOpen(stream) else { return }
            write()
        }
    }
}
