import CallContract
import Foundation
import Hummingbird
import NIOCore
import ServiceLifecycle

extension DispatchAPI {
    /// How long after its limit (or a shutdown) a stream whose client stopped reading keeps its
    /// connection: then the connection is closed under the blocked write.
    static let streamCloseGrace: Duration = .seconds(5)
    /// The reconnection delay (`retry:`) suggested to EventSource clients.
    static let streamRetryMilliseconds = 5_000

    /// `GET /v1/calls/{callId}/events`: Server-Sent Events. First the statuses of every delivery
    /// (worker states and device reports; after `Last-Event-ID` only newer ones), then each change
    /// (`id: <n>`, `event: status`, `data: <CallStatus JSON>`), and `event: end`
    /// (`data: {"complete": true}`) once every delivery is terminal, or `{"complete": false}` when
    /// the stream's time limit ran out or the server shuts down. A comment every 15 s keeps proxies
    /// from closing it. A finished call resumed with a `Last-Event-ID` that has seen everything
    /// answers 204, which stops an EventSource from reconnecting.
    func events(_ request: Request, key: APIKey, callId: String, channel: (any Channel)?) throws(DispatchProblem) -> Response {
        let call = try ownCall(key: key, callId: callId)
        let lastEventID = request.headers[.lastEventID].flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
        if call.isComplete, let lastEventID, lastEventID >= call.lastEventID {
            return Response(status: .noContent)
        }
        guard streams.acquire(key.name) else {
            throw streams.isFull ? DispatchProblem.tooManyStreams(retryAfter: configuration.retryAfterSeconds, total: true)
                : DispatchProblem.tooManyStreams(retryAfter: configuration.retryAfterSeconds, total: false)
        }
        guard let subscription = view.subscribe(CallKey(tenant: key.tenant, callId: callId), after: lastEventID,
                                                bufferBytes: configuration.eventStreamBufferBytes) else {
            streams.release(key.name)
            throw DispatchProblem.notFound(callId)
        }
        let limit = configuration.eventStreamLimit
        let streams = self.streams
        let body = ResponseBody { writer in
            defer {
                subscription.cancel()
                streams.release(key.name)
            }
            let buffer = subscription.buffer
            try await writer.write(ByteBuffer(string: "retry: \(Self.streamRetryMilliseconds)\n\n"))
            for (id, status) in subscription.initial { try await writer.write(StatusView.frame(id: id, status: status)) }
            if subscription.complete { buffer.finish(complete: true) }
            // The limit, keep-alives and shutdown go through the buffer; if the client stops reading,
            // the write stays blocked, and the connection is closed under it after a grace.
            let timers = Task {
                let end = ContinuousClock.now + limit
                while ContinuousClock.now < end {
                    try await Task.sleep(for: min(.seconds(15), end - ContinuousClock.now))
                    buffer.keepalive()
                }
                buffer.finish(complete: false)
                try await Task.sleep(for: Self.streamCloseGrace)
                channel?.close(promise: nil)
            }
            defer { timers.cancel() }
            try await withGracefulShutdownHandler {
                while let item = await buffer.next() {
                    switch item {
                    case .frame(let frame): try await writer.write(frame)
                    case .end(let complete):
                        try await writer.write(Self.sseEnd(complete: complete))
                        try await writer.finish(nil)
                        return
                    }
                }
            } onGracefulShutdown: {
                buffer.finish(complete: false)
                Task {
                    try await Task.sleep(for: Self.streamCloseGrace)
                    channel?.close(promise: nil)
                }
            }
        }
        // The connection ends with the stream: a reader that got `end` (or stopped reading) has no
        // use for it, and an EventSource opens a new one to resume.
        return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache", .xAccelBuffering: "no",
                                               .connection: "close"],
                        body: body)
    }

    /// The end has no `id:`: a client resuming after it still names the last status it saw.
    static func sseEnd(complete: Bool) -> ByteBuffer {
        ByteBuffer(string: "event: end\ndata: {\"complete\":\(complete)}\n\n")
    }
}
