import CallContract
import Foundation
import Hummingbird
import NIOCore

extension DispatchAPI {
    enum StreamItem: Sendable {
        case event(StatusView.Event)
        case keepalive
        case limit
    }

    /// `GET /v1/calls/{callId}/events`: Server-Sent Events. First the latest status of every
    /// delivery, then each change (`event: status`, `data: <CallStatus JSON>`), and `event: end`
    /// (`data: {"complete": true}`) once every delivery is terminal — or `{"complete": false}` when
    /// the stream's time limit ran out. A comment line every 15 s keeps proxies from closing it.
    func events(callId: String) throws(DispatchProblem) -> Response {
        guard let subscription = view.subscribe(callId) else { throw DispatchProblem.notFound(callId) }
        let limit = configuration.eventStreamLimit
        let body = ResponseBody { writer in
            defer { subscription.cancel() }
            for status in subscription.initial { try await writer.write(Self.sse(status)) }
            if subscription.complete {
                try await writer.write(Self.sseEnd(complete: true))
                try await writer.finish(nil)
                return
            }
            let (items, continuation) = AsyncStream<StreamItem>.makeStream()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await event in subscription.events { continuation.yield(.event(event)) }
                }
                group.addTask {
                    while !Task.isCancelled {
                        try await Task.sleep(for: .seconds(15))
                        continuation.yield(.keepalive)
                    }
                }
                group.addTask {
                    try await Task.sleep(for: limit)
                    continuation.yield(.limit)
                }
                loop: for await item in items {
                    switch item {
                    case .event(.status(let status)): try await writer.write(Self.sse(status))
                    case .event(.complete):
                        try await writer.write(Self.sseEnd(complete: true))
                        break loop
                    case .keepalive: try await writer.write(ByteBuffer(string: ": keepalive\n\n"))
                    case .limit:
                        try await writer.write(Self.sseEnd(complete: false))
                        break loop
                    }
                }
                continuation.finish()
                group.cancelAll()
                subscription.cancel()
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"], body: body)
    }

    static func sse(_ status: CallStatus) -> ByteBuffer {
        let json = (try? status.encoded()).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return ByteBuffer(string: "event: status\ndata: \(json)\n\n")
    }

    static func sseEnd(complete: Bool) -> ByteBuffer {
        ByteBuffer(string: "event: end\ndata: {\"complete\":\(complete)}\n\n")
    }
}
