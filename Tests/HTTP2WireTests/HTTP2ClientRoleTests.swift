import HTTP2Wire
import NIOCore
import NIOHPACK
import Testing

/// ``HTTP2Connection`` in the client role (the APNs client's), against a scripted server whose answers are encoded
/// with NIOHPACK's full encoder (dynamic table on): requests as the server decodes them, answers, resets, GOAWAY,
/// stream limits and flow control. (nghttpd interoperability: APNsTests.)
@Suite("HTTP/2 connection, client role")
struct HTTP2ClientRoleTests {
    typealias Frame = HTTP2ServerRoleTests.Frame
    typealias Bytes = HTTP2ServerRoleTests.Peer

    final class Recorder: HTTP2ConnectionDelegate {
        var headers: [UInt32: [HPACKHeaders]] = [:]
        var bodies: [UInt32: [UInt8]] = [:]
        var ended: [UInt32: HTTP2StreamEnd] = [:]
        var maxStreams: [Int?] = []
        var goAway: UInt32?

        func http2Headers(_ headers: HPACKHeaders, stream: UInt32) { self.headers[stream, default: []].append(headers) }
        func http2Data(_ data: ByteBuffer, stream: UInt32) { bodies[stream, default: []] += Array(data.readableBytesView) }
        func http2RemoteEnded(_ stream: UInt32) {}
        func http2StreamClosed(_ stream: UInt32, _ end: HTTP2StreamEnd) { ended[stream] = end }
        func http2PeerSettings(maxConcurrentStreams: Int?, first: Bool) { maxStreams.append(maxConcurrentStreams) }
        func http2GoAway(lastStreamID: UInt32, code: HTTP2Wire.ErrorCode, debugData: ByteBuffer) { goAway = lastStreamID }
    }

    /// A client connection and the server side of the test: NIOHPACK encoder (indexing) and decoder.
    final class Server {
        let client = HTTP2Connection(
            role: .client, allocator: ByteBufferAllocator(), settings: [(.enablePush, 0), (.maxConcurrentStreams, 100)],
            streamWindow: HTTP2Wire.defaultWindow, connectionWindow: 1 << 20, maxHeaderListSize: 16_384
        )
        let recorder = Recorder()
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())

        init() { client.delegate = recorder }

        /// The client's output as frames (after the preface, when `preface`).
        func output(preface: Bool = false) -> [Frame] {
            guard var buffer = client.takeOutput() else { return [] }
            if preface {
                #expect(buffer.readBytes(length: HTTP2Wire.clientPreface.count) == HTTP2Wire.clientPreface)
            }
            var frames: [Frame] = []
            while buffer.readableBytes >= 9 {
                let length = Int(buffer.readInteger(as: UInt16.self)!) << 8 | Int(buffer.readInteger(as: UInt8.self)!)
                let type = buffer.readInteger(as: UInt8.self)!
                let flags = buffer.readInteger(as: UInt8.self)!
                let stream = buffer.readInteger(as: UInt32.self)! & 0x7fff_ffff
                frames.append(Frame(type: type, flags: flags, stream: stream, payload: buffer.readBytes(length: length)!))
            }
            #expect(buffer.readableBytes == 0)
            return frames
        }

        /// Server SETTINGS (+ ACK of the client's), then the client's output is dropped.
        func handshake(_ settings: [(UInt16, UInt32)] = [(0x3, 100)]) {
            _ = output(preface: true)
            client.receive(ByteBuffer(bytes: Bytes.frame(type: 0x4, flags: 0, stream: 0, payload: Bytes.settingsPayload(settings))))
            _ = output()
        }

        func send(_ bytes: [UInt8]) -> [Frame] {
            client.receive(ByteBuffer(bytes: bytes))
            return output()
        }

        /// A response header block, HPACK-encoded with indexing (the dynamic table changes).
        func responseHeaders(stream: UInt32, status: String, apnsID: String, endStream: Bool) -> [UInt8] {
            var block = ByteBuffer()
            try! encoder.encode(headers: HPACKHeaders([(":status", status), ("apns-id", apnsID), ("server", "scripted")]), to: &block)
            return Bytes.frame(type: 0x1, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, payload: Array(block.readableBytesView))
        }

        static let request: [(name: String, value: String)] = [
            (":method", "POST"), (":scheme", "https"), (":authority", "api.push.apple.com"), (":path", "/3/device/abc"),
            ("apns-push-type", "voip"), ("authorization", "bearer abc.def.ghi"),
        ]
    }

    @Test("the preface, then a request the server decodes exactly, with the credentials never indexed")
    func prefaceAndRequest() throws {
        let server = Server()
        let preface = server.output(preface: true)
        #expect(preface.first?.type == 0x4)
        #expect(preface.first?.payload == Bytes.settingsPayload([(0x2, 0), (0x3, 100), (0x6, 16_384)]))
        #expect(preface.dropFirst().first == Frame(type: 0x8, flags: 0, stream: 0, payload: [0x00, 0x0f, 0x00, 0x01]))  // 2^20 − 65535
        server.client.receive(ByteBuffer(bytes: Bytes.frame(type: 0x4, flags: 0, stream: 0, payload: [])))
        #expect(server.recorder.maxStreams == [nil])
        let stream = try #require(server.client.openStream(headers: Server.request, body: ByteBuffer(string: "{}")))
        #expect(stream == 1)
        let frames = server.output()
        #expect(frames.map(\.type) == [0x4, 0x1, 0x0])  // SETTINGS ACK, HEADERS, DATA
        var block = ByteBuffer(bytes: frames[1].payload)
        let decoded = try server.decoder.decodeHeaders(from: &block)
        #expect(decoded.map { "\($0.name): \($0.value)" } == Server.request.map { "\($0.name): \($0.value)" })
        #expect(decoded.first { $0.name == "authorization" }?.indexable == .neverIndexed)
        #expect(frames[2] == Frame(type: 0x0, flags: 0x1, stream: 1, payload: Array("{}".utf8)))
        #expect(server.client.openStream(headers: Server.request, body: nil) == 3)
    }

    @Test("answers decode while the server's dynamic table changes, also when one arrives for a stream the client reset")
    func answersAndLateAnswer() throws {
        let server = Server()
        server.handshake()
        _ = server.client.openStream(headers: Server.request, body: ByteBuffer(string: "{}"))  // 1
        _ = server.client.openStream(headers: Server.request, body: ByteBuffer(string: "{}"))  // 3
        _ = server.client.openStream(headers: Server.request, body: ByteBuffer(string: "{}"))  // 5
        _ = server.output()
        server.client.resetStream(3, .cancel)  // e.g. its deadline passed
        #expect(server.output() == [Frame(type: 0x3, flags: 0, stream: 3, payload: [0, 0, 0, 8])])
        #expect(server.recorder.ended[3] == .resetLocally(.cancel))
        // The server answers 3 anyway (in flight), adding entries to its table, then 1 and 5 reuse them.
        var bytes = server.responseHeaders(stream: 3, status: "200", apnsID: "late", endStream: true)
        bytes += server.responseHeaders(stream: 1, status: "410", apnsID: "late", endStream: false) + Bytes.data(stream: 1, Array(#"{"reason":"Unregistered"}"#.utf8))
        bytes += server.responseHeaders(stream: 5, status: "200", apnsID: "five", endStream: true)
        #expect(server.send(bytes).isEmpty)
        #expect(server.recorder.headers[3] == nil)
        #expect(server.recorder.headers[1]?.first?.first(name: ":status") == "410")
        #expect(server.recorder.headers[1]?.first?.first(name: "apns-id") == "late")
        #expect(server.recorder.bodies[1] == Array(#"{"reason":"Unregistered"}"#.utf8))
        #expect(server.recorder.headers[5]?.first?.first(name: "apns-id") == "five")
        #expect(server.recorder.ended[1] == .completed && server.recorder.ended[5] == .completed)
        #expect(server.client.openStreamCount == 0 && !server.client.wantsClose)
    }

    @Test("REFUSED_STREAM and GOAWAY: refused streams end as such, streams up to the last id still complete")
    func refusedAndGoAway() throws {
        let server = Server()
        server.handshake()
        for _ in 0..<4 { _ = server.client.openStream(headers: Server.request, body: nil) }  // 1, 3, 5, 7
        _ = server.output()
        _ = server.send(Bytes.frame(type: 0x3, flags: 0, stream: 1, payload: [0, 0, 0, 7]))
        #expect(server.recorder.ended[1] == .resetByPeer(.refusedStream))
        _ = server.send(Bytes.frame(type: 0x7, flags: 0, stream: 0, payload: [0, 0, 0, 3, 0, 0, 0, 0]))
        #expect(server.recorder.goAway == 3)
        #expect(server.recorder.ended[5] == .refusedByGoAway && server.recorder.ended[7] == .refusedByGoAway)
        #expect(!server.client.canOpenStream)
        #expect(server.client.openStream(headers: Server.request, body: nil) == nil)
        #expect(!server.client.wantsClose)  // stream 3 is still being answered
        _ = server.send(server.responseHeaders(stream: 3, status: "200", apnsID: "x", endStream: true))
        #expect(server.recorder.ended[3] == .completed)
        #expect(server.client.wantsClose)
    }

    @Test("a client runs out of stream ids at 2^31 − 1: no more streams, and a GOAWAY closes it once the last is answered")
    func streamIDExhaustion() throws {
        let client = HTTP2Connection(
            role: .client, allocator: ByteBufferAllocator(), settings: [], streamWindow: HTTP2Wire.defaultWindow,
            connectionWindow: HTTP2Wire.defaultWindow, maxHeaderListSize: 16_384, firstStreamID: 0x7fff_fffb
        )
        let recorder = Recorder()
        client.delegate = recorder
        client.receive(ByteBuffer(bytes: Bytes.frame(type: 0x4, flags: 0, stream: 0, payload: [])))
        #expect(client.openStream(headers: Server.request, body: nil) == 0x7fff_fffb)
        #expect(client.openStream(headers: Server.request, body: nil) == 0x7fff_fffd)
        #expect(!client.streamIDsExhausted)
        #expect(client.openStream(headers: Server.request, body: nil) == 0x7fff_ffff)
        #expect(client.streamIDsExhausted && !client.canOpenStream)
        #expect(client.openStream(headers: Server.request, body: nil) == nil)
        client.goAway()
        #expect(!client.wantsClose)
        for stream: UInt32 in [0x7fff_fffb, 0x7fff_fffd, 0x7fff_ffff] {
            var block = ByteBuffer()
            var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
            try encoder.encode(headers: HPACKHeaders([(":status", "200")]), to: &block)
            client.receive(ByteBuffer(bytes: Bytes.frame(type: 0x1, flags: 0x5, stream: stream, payload: Array(block.readableBytesView))))
        }
        #expect(recorder.ended.values.allSatisfy { $0 == .completed } && recorder.ended.count == 3)
        #expect(client.wantsClose)
    }

    @Test("the server's MAX_CONCURRENT_STREAMS limits open streams; a completed stream frees a slot")
    func streamLimit() throws {
        let server = Server()
        server.handshake([(0x3, 1)])
        #expect(server.recorder.maxStreams == [1])
        #expect(server.client.openStream(headers: Server.request, body: nil) == 1)
        #expect(!server.client.canOpenStream)
        _ = server.output()
        _ = server.send(server.responseHeaders(stream: 1, status: "200", apnsID: "x", endStream: true))
        #expect(server.client.canOpenStream)
    }

    @Test("request bodies wait for flow-control credit; an answer before the body is all sent resets the rest")
    func flowControlAndEarlyAnswer() throws {
        let server = Server()
        server.handshake([(0x4, 4)])  // 4-byte stream windows
        _ = server.client.openStream(headers: Server.request, body: ByteBuffer(string: "0123456789"))
        let first = server.output()
        #expect(first.map(\.type) == [0x1, 0x0])
        #expect(first[1] == Frame(type: 0x0, flags: 0, stream: 1, payload: Array("0123".utf8)))
        #expect(server.send(Bytes.windowUpdate(stream: 1, 3)) == [Frame(type: 0x0, flags: 0, stream: 1, payload: Array("456".utf8))])
        // The server answers (413) before the rest arrives: the client stops sending and cancels the stream.
        let reset = server.send(server.responseHeaders(stream: 1, status: "413", apnsID: "x", endStream: true))
        #expect(reset == [Frame(type: 0x3, flags: 0, stream: 1, payload: [0, 0, 0, 8])])
        #expect(server.recorder.ended[1] == .completed)
        #expect(server.send(Bytes.windowUpdate(stream: 1, 100)).isEmpty)
    }

    @Test("server protocol errors end the connection with GOAWAY and end every stream", arguments: [
        ("DATA on a stream the client never opened", Bytes.data(stream: 9, [1])),
        ("HEADERS on an even stream (server push without PUSH_PROMISE)", Bytes.frame(type: 0x1, flags: 0x5, stream: 2, payload: [0x88])),
        ("PUSH_PROMISE although push is disabled", Bytes.frame(type: 0x5, flags: 0x4, stream: 1, payload: [0, 0, 0, 2, 0x88])),
        ("garbage HPACK", Bytes.frame(type: 0x1, flags: 0x5, stream: 1, payload: [0xff, 0xff, 0xff, 0xff, 0xff])),
    ] as [(String, [UInt8])])
    func serverProtocolErrors(_ name: String, _ bytes: [UInt8]) throws {
        let server = Server()
        server.handshake()
        _ = server.client.openStream(headers: Server.request, body: nil)
        _ = server.output()
        let frames = server.send(bytes)
        #expect(frames.last?.type == 0x7, "\(name)")
        #expect(server.client.wantsClose, "\(name)")
        #expect(server.recorder.ended[1] == .connectionError, "\(name)")
    }
}
