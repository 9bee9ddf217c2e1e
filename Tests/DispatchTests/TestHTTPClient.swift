import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// A response as the tests see it.
struct HTTPAnswer: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data

    var text: String { String(decoding: body, as: UTF8.self) }
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body) as? [String: Any]) ?? [:] }
    var contentType: String { headers["content-type"] ?? "" }
}

/// A minimal HTTP/1.1 client (one connection per request, bounded in time) for real responses.
enum TestHTTPClient {
    struct Timeout: Error {}

    static func request(_ method: HTTPMethod, port: Int, path: String, headers: [String: String] = [:],
                        body: Data? = nil, timeout: Duration = .seconds(30)) async throws -> HTTPAnswer {
        let task = Task { try await perform(method, port: port, path: path, headers: headers, body: body) }
        let timer = Task {
            try await Task.sleep(for: timeout)
            task.cancel()
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    private static func perform(_ method: HTTPMethod, port: Int, path: String, headers: [String: String], body: Data?) async throws -> HTTPAnswer {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return try await withTaskCancellationHandler {
            try await channel.executeThenClose { inbound, outbound in
                var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
                head.headers.add(name: "Host", value: "127.0.0.1:\(port)")
                head.headers.add(name: "Connection", value: "close")
                if let body { head.headers.add(name: "Content-Length", value: String(body.count)) }
                for (name, value) in headers { head.headers.replaceOrAdd(name: name, value: value) }
                // A server may answer before it reads the body (401, 413, 429 with `Connection:
                // close`) and close; like curl, the client then reads the answer it was sent.
                var writeError: (any Error)?
                do {
                    try await outbound.write(.head(head))
                    if let body { try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
                    try await outbound.write(.end(nil))
                } catch {
                    writeError = error
                }
                var answer = HTTPAnswer(status: 0, headers: [:], body: Data())
                do {
                    for try await part in inbound {
                        switch part {
                        case .head(let response):
                            answer.status = Int(response.status.code)
                            for header in response.headers { answer.headers[header.name.lowercased()] = header.value }
                        case .body(let buffer): answer.body.append(contentsOf: buffer.readableBytesView)
                        case .end: return answer
                        }
                    }
                } catch {
                    throw writeError ?? error
                }
                if let writeError, answer.status == 0 { throw writeError }
                return answer
            }
        } onCancel: {
            channel.channel.close(promise: nil)
        }
    }
}
