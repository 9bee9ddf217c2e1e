@testable import HTTP2Wire
import NIOCore
import NIOHPACK
import Testing

/// ``HTTP2Connection`` in the server role (the APNs simulator's), byte for byte: what a client sees for
/// well-formed and malformed input. (Interoperability with independent clients — h2load, aioapns, NIOHTTP2 — is
/// covered by the simulator suites and the benchmark.)
@Suite("HTTP/2 connection, server role")
struct HTTP2ServerRoleTests {
    struct Frame: Equatable {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: [UInt8]

        var errorCode: UInt32? {
            switch type {
            case 0x3: return payload.count == 4 ? Self.integer(payload[0..<4]) : nil
            case 0x7: return payload.count >= 8 ? Self.integer(payload[4..<8]) : nil
            default: return nil
            }
        }

        static func integer(_ bytes: ArraySlice<UInt8>) -> UInt32 {
            bytes.reduce(0) { $0 << 8 | UInt32($1) }
        }
    }

    /// Records what the framing tells the application; answers every ended request unless told not to.
    final class Recorder: HTTP2ConnectionDelegate {
        var opened: [UInt32: HPACKHeaders] = [:]
        var bodies: [UInt32: [UInt8]] = [:]
        var ended: [UInt32] = []
        var closed: [UInt32] = []
        var admission = HTTP2Admission.accept
        var answer: ((UInt32) -> Void)?
        var onClosed: ((UInt32) -> Void)?

        func http2StreamOpened(_ stream: UInt32, headers: HPACKHeaders) -> HTTP2Admission {
            opened[stream] = headers
            return admission
        }

        func http2Data(_ data: ByteBuffer, stream: UInt32) {
            bodies[stream, default: []] += Array(data.readableBytesView)
        }

        func http2RemoteEnded(_ stream: UInt32) {
            ended.append(stream)
            answer?(stream)
        }

        func http2StreamClosed(_ stream: UInt32, _ end: HTTP2StreamEnd) {
            onClosed?(stream)
            closed.append(stream)
        }
    }

    /// A framing with a recorder, plus a client-side HPACK encoder/decoder.
    final class Peer {
        let framing: HTTP2Connection
        let recorder = Recorder()
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())

        init(maxConcurrentStreams: Int = 100, streamWindow: Int = 1 << 20, connectionWindow: Int = 1 << 24) {
            framing = HTTP2Connection(
                allocator: ByteBufferAllocator(), settings: [(.maxConcurrentStreams, maxConcurrentStreams)],
                streamWindow: streamWindow, connectionWindow: connectionWindow, maxHeaderListSize: 8192
            )
            framing.delegate = recorder
        }

        /// Sends bytes, returns the frames the server wrote.
        @discardableResult
        func send(_ bytes: [UInt8]) -> [Frame] {
            framing.receive(ByteBuffer(bytes: bytes))
            return output()
        }

        func output() -> [Frame] {
            guard var buffer = framing.takeOutput() else { return [] }
            var frames: [Frame] = []
            while buffer.readableBytes >= 9 {
                let high = Int(buffer.readInteger(as: UInt16.self)!)
                let length = high << 8 | Int(buffer.readInteger(as: UInt8.self)!)
                let type = buffer.readInteger(as: UInt8.self)!
                let flags = buffer.readInteger(as: UInt8.self)!
                let stream = buffer.readInteger(as: UInt32.self)! & 0x7fff_ffff
                frames.append(Frame(type: type, flags: flags, stream: stream, payload: buffer.readBytes(length: length)!))
            }
            #expect(buffer.readableBytes == 0, "the output ends in a partial frame")
            return frames
        }

        /// Preface and an empty SETTINGS (or the given settings), then the server's SETTINGS ACK is expected.
        @discardableResult
        func connect(settings: [(UInt16, UInt32)] = []) -> [Frame] {
            send(HTTP2Wire.clientPreface + Self.frame(type: 0x4, flags: 0, stream: 0, payload: Self.settingsPayload(settings)))
        }

        func headerBlock(_ headers: [(String, String)]) -> [UInt8] {
            var buffer = ByteBuffer()
            try! encoder.encode(headers: HPACKHeaders(headers), to: &buffer)
            return Array(buffer.readableBytesView)
        }

        static let request: [(String, String)] = [
            (":method", "POST"), (":scheme", "https"), (":path", "/3/device/abc"), (":authority", "localhost"),
            ("apns-push-type", "voip"),
        ]

        func headers(stream: UInt32, _ headers: [(String, String)] = Peer.request, endStream: Bool = false) -> [UInt8] {
            Self.frame(type: 0x1, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, payload: headerBlock(headers))
        }

        static func data(stream: UInt32, _ bytes: [UInt8], endStream: Bool = true) -> [UInt8] {
            frame(type: 0x0, flags: endStream ? 0x1 : 0, stream: stream, payload: bytes)
        }

        static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8]) -> [UInt8] {
            let length = payload.count
            return [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags]
                + withUnsafeBytes(of: stream.bigEndian, Array.init) + payload
        }

        static func settingsPayload(_ settings: [(UInt16, UInt32)]) -> [UInt8] {
            settings.flatMap { withUnsafeBytes(of: $0.0.bigEndian, Array.init) + withUnsafeBytes(of: $0.1.bigEndian, Array.init) }
        }

        static func windowUpdate(stream: UInt32, _ increment: UInt32) -> [UInt8] {
            frame(type: 0x8, flags: 0, stream: stream, payload: withUnsafeBytes(of: increment.bigEndian, Array.init))
        }

        func answer(_ stream: UInt32, status: String = "200", body: String? = nil) {
            framing.send(
                stream: stream, headers: [(":status", status), ("apns-id", "id-\(stream)")], body: body.map { ByteBuffer(string: $0) }
            )
        }

        func decodeHeaders(_ frame: Frame) throws -> HPACKHeaders {
            var buffer = ByteBuffer(bytes: frame.payload)
            return try decoder.decodeHeaders(from: &buffer)
        }
    }

    static let settings: UInt8 = 0x4
    static let rstStream: UInt8 = 0x3
    static let goAway: UInt8 = 0x7

    @Test("server preface: SETTINGS with the limits, the connection window opened, the client's SETTINGS acknowledged")
    func preface() throws {
        let peer = Peer(maxConcurrentStreams: 7)
        let frames = peer.connect(settings: [(0x4, 0)])
        #expect(frames.count == 3)
        #expect(frames[0].type == Self.settings && frames[0].flags == 0)
        #expect(frames[0].payload == Peer.settingsPayload([(0x3, 7), (0x6, 8192), (0x4, 1 << 20)]))
        #expect(frames[1] == Frame(type: 0x8, flags: 0, stream: 0, payload: [0x00, 0xff, 0x00, 0x01]))  // 2^24 − 65535
        #expect(frames[2] == Frame(type: Self.settings, flags: 0x1, stream: 0, payload: []))
        #expect(!peer.framing.wantsClose)
    }

    @Test("a request split across reads byte by byte reaches the application whole, and its answer ends the stream")
    func requestAndAnswer() throws {
        let peer = Peer()
        peer.connect()
        peer.recorder.answer = { peer.answer($0, status: "400", body: #"{"reason":"BadDeviceToken"}"#) }
        let bytes = peer.headers(stream: 1) + Peer.data(stream: 1, Array("{\"aps\":{}}".utf8))
        var frames: [Frame] = []
        for byte in bytes { frames += peer.send([byte]) }
        #expect(peer.recorder.opened[1]?.first(name: ":path") == "/3/device/abc")
        #expect(peer.recorder.bodies[1] == Array("{\"aps\":{}}".utf8))
        #expect(peer.recorder.ended == [1])
        #expect(frames.map(\.type) == [0x1, 0x0])
        #expect(frames[0].flags == 0x4)  // END_HEADERS; the DATA ends the stream
        let headers = try peer.decodeHeaders(frames[0])
        #expect(headers.first(name: ":status") == "400")
        #expect(headers.first(name: "apns-id") == "id-1")
        #expect(frames[1].flags == 0x1 && frames[1].payload == Array(#"{"reason":"BadDeviceToken"}"#.utf8))
        #expect(peer.recorder.closed == [1])
        #expect(peer.framing.openStreamCount == 0)
    }

    @Test("answer headers decode with a standard HPACK decoder; a table size update opens the first block and follows a SETTINGS change")
    func answerEncoding() throws {
        let peer = Peer()
        peer.connect()
        let long = String(repeating: "x", count: 300)
        var blocks: [Frame] = []
        for (stream, status) in [(UInt32(1), "200"), (3, "410"), (5, "503")] {
            peer.send(peer.headers(stream: stream, endStream: true))
            peer.framing.send(stream: stream, headers: [(":status", status), ("apns-id", long), ("content-type", "application/json")], body: nil)
            blocks += peer.output()
            if stream == 3 { peer.send(Peer.frame(type: 0x4, flags: 0, stream: 0, payload: Peer.settingsPayload([(0x1, 256)]))) }
        }
        #expect(blocks.count == 3)
        #expect(blocks.map { $0.payload.first } == [0x20, 0x00 | 0x08, 0x20])
        for (frame, status) in zip(blocks, ["200", "410", "503"]) {
            #expect(frame.flags == 0x5)
            let headers = try peer.decodeHeaders(frame)
            #expect(headers.map(\.name) == [":status", "apns-id", "content-type"])
            #expect(headers.first(name: ":status") == status)
            #expect(headers.first(name: "apns-id") == long)
        }
    }

    @Test("a header block split into HEADERS + CONTINUATION is decoded; padding and priority fields are skipped")
    func continuationPaddingPriority() throws {
        let peer = Peer()
        peer.connect()
        let block = peer.headerBlock(Peer.request)
        let split = block.count / 2
        // HEADERS with PADDED and PRIORITY: pad length 3, 5 priority bytes, first half, 3 pad bytes.
        let first = Peer.frame(type: 0x1, flags: 0x8 | 0x20, stream: 1, payload: [3, 0, 0, 0, 0, 16] + block[..<split] + [0, 0, 0])
        let second = Peer.frame(type: 0x9, flags: 0x4 | 0, stream: 1, payload: Array(block[split...]))
        peer.send(first + second + Peer.frame(type: 0x0, flags: 0x8 | 0x1, stream: 1, payload: [2, 0x41, 0x42, 0, 0]))
        #expect(peer.recorder.opened[1]?.first(name: "apns-push-type") == "voip")
        #expect(peer.recorder.bodies[1] == [0x41, 0x42])
        #expect(peer.recorder.ended == [1])
    }

    @Test(
        "connection errors end the connection with GOAWAY and the RFC's code",
        arguments: [
            ("bad preface", Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8), 0x1),
            ("frame above 16 KiB", Peer.frame(type: 0x0, flags: 0, stream: 1, payload: Array(repeating: 0, count: 16_385)), 0x6),
            ("garbage HPACK", Peer.frame(type: 0x1, flags: 0x5, stream: 1, payload: [0xff, 0xff, 0xff, 0xff, 0xff]), 0x9),
            ("even stream id", Peer.frame(type: 0x1, flags: 0x5, stream: 2, payload: [0x82]), 0x1),
            ("DATA on an idle stream", Peer.data(stream: 5, [1]), 0x1),
            ("PUSH_PROMISE from a client", Peer.frame(type: 0x5, flags: 0x4, stream: 1, payload: [0, 0, 0, 2]), 0x1),
            ("PING of 7 bytes", Peer.frame(type: 0x6, flags: 0, stream: 0, payload: [1, 2, 3, 4, 5, 6, 7]), 0x6),
            ("WINDOW_UPDATE of 0", Peer.windowUpdate(stream: 0, 0), 0x1),
            ("CONTINUATION without HEADERS", Peer.frame(type: 0x9, flags: 0x4, stream: 1, payload: [0x82]), 0x1),
            ("SETTINGS with a bad length", Peer.frame(type: 0x4, flags: 0, stream: 0, payload: [0, 1, 0]), 0x6),
            ("SETTINGS_MAX_FRAME_SIZE too small", Peer.frame(type: 0x4, flags: 0, stream: 0, payload: Peer.settingsPayload([(0x5, 100)])), 0x1),
            ("SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1", Peer.frame(type: 0x4, flags: 0, stream: 0, payload: Peer.settingsPayload([(0x4, 0x8000_0000)])), 0x3),
        ] as [(String, [UInt8], UInt32)]
    )
    func connectionErrors(_ name: String, _ bytes: [UInt8], _ code: UInt32) throws {
        let peer = Peer()
        if name != "bad preface" { peer.connect() }
        let frames = peer.send(bytes)
        let goAway = try #require(frames.last { $0.type == Self.goAway }, "\(name): no GOAWAY")
        #expect(goAway.errorCode == code, "\(name)")
        #expect(peer.framing.wantsClose, "\(name)")
        // Nothing more is processed on a failed connection.
        #expect(peer.send(peer.headers(stream: 7, endStream: true)).isEmpty)
        #expect(peer.recorder.opened[7] == nil)
    }

    @Test("the first frame must be SETTINGS; frames interleaved in a header block are a protocol error")
    func framingOrder() throws {
        let notSettings = Peer()
        let frames = notSettings.send(HTTP2Wire.clientPreface + Peer.frame(type: 0x6, flags: 0, stream: 0, payload: [0, 0, 0, 0, 0, 0, 0, 0]))
        #expect(frames.last?.type == Self.goAway && frames.last?.errorCode == 0x1)

        let peer = Peer()
        peer.connect()
        let block = peer.headerBlock(Peer.request)
        let interleaved = peer.send(
            Peer.frame(type: 0x1, flags: 0, stream: 1, payload: Array(block[..<4]))
                + Peer.frame(type: 0x6, flags: 0, stream: 0, payload: [0, 0, 0, 0, 0, 0, 0, 0])
        )
        #expect(interleaved.last?.type == Self.goAway && interleaved.last?.errorCode == 0x1)
    }

    @Test("malformed requests are stream errors (RST_STREAM PROTOCOL_ERROR); the connection keeps serving", arguments: [
        [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/abc"), ("Apns-Topic", "x")],
        [(":method", "POST"), (":scheme", "https"), ("apns-topic", "x")],
        [(":method", "POST"), ("apns-topic", "x"), (":scheme", "https"), (":path", "/")],
        [(":method", "POST"), (":scheme", "https"), (":path", "/"), (":status", "200")],
        [(":method", "POST"), (":scheme", "https"), (":path", "/"), ("connection", "keep-alive")],
        [(":method", "POST"), (":scheme", "https"), (":path", "/"), ("content-length", "ten")],
    ] as [[(String, String)]])
    func malformedRequests(_ headers: [(String, String)]) throws {
        let peer = Peer()
        peer.connect()
        let frames = peer.send(peer.headers(stream: 1, headers, endStream: true))
        #expect(frames == [Frame(type: Self.rstStream, flags: 0, stream: 1, payload: [0, 0, 0, 1])])
        #expect(peer.recorder.opened.isEmpty)
        peer.recorder.answer = { peer.answer($0) }
        let next = peer.send(peer.headers(stream: 3, endStream: true))
        #expect(next.map(\.type) == [0x1] && next.first?.flags == 0x5)
    }

    @Test("a body that does not match content-length resets the stream before the application answers it")
    func contentLengthMismatch() throws {
        let peer = Peer()
        peer.connect()
        let frames = peer.send(peer.headers(stream: 1, Peer.request + [("content-length", "5")]) + Peer.data(stream: 1, [1, 2, 3]))
        #expect(frames == [Frame(type: Self.rstStream, flags: 0, stream: 1, payload: [0, 0, 0, 1])])
        #expect(peer.recorder.ended.isEmpty)
        #expect(peer.recorder.closed == [1])
    }

    @Test("streams above MAX_CONCURRENT_STREAMS are refused once the client acknowledged it; PING is answered")
    func concurrencyAndPing() throws {
        let peer = Peer(maxConcurrentStreams: 2)
        peer.connect()
        peer.send(Peer.frame(type: 0x4, flags: 0x1, stream: 0, payload: []))  // ACK of our SETTINGS
        let frames = peer.send(
            peer.headers(stream: 1, endStream: true) + peer.headers(stream: 3, endStream: true) + peer.headers(stream: 5, endStream: true)
                + Peer.frame(type: 0x6, flags: 0, stream: 0, payload: [1, 2, 3, 4, 5, 6, 7, 8])
        )
        #expect(frames == [
            Frame(type: Self.rstStream, flags: 0, stream: 5, payload: [0, 0, 0, 7]),
            Frame(type: 0x6, flags: 0x1, stream: 0, payload: [1, 2, 3, 4, 5, 6, 7, 8]),
        ])
        #expect(Set(peer.recorder.opened.keys) == [1, 3])
        // Answering one frees a slot.
        peer.answer(1)
        _ = peer.output()
        peer.send(peer.headers(stream: 7, endStream: true))
        #expect(peer.recorder.opened[7] != nil)
    }

    @Test("answers respect the client's flow-control windows: DATA waits for WINDOW_UPDATE")
    func sendFlowControl() throws {
        let peer = Peer()
        peer.connect(settings: [(0x4, 4)])  // the client's stream windows are 4 bytes
        peer.send(peer.headers(stream: 1, endStream: true))
        peer.answer(1, status: "410", body: "0123456789")
        let first = peer.output()
        #expect(first.map(\.type) == [0x1, 0x0])
        #expect(first[1].payload == Array("0123".utf8) && first[1].flags == 0)
        #expect(peer.recorder.closed.isEmpty)
        let rest = peer.send(Peer.windowUpdate(stream: 1, 100))
        #expect(rest == [Frame(type: 0x0, flags: 0x1, stream: 1, payload: Array("456789".utf8))])
        #expect(peer.recorder.closed == [1])
    }

    @Test("DATA beyond the stream window resets the stream; beyond the connection window ends the connection")
    func receiveFlowControl() throws {
        let peer = Peer(streamWindow: 10, connectionWindow: 65_535)
        peer.connect()
        let frames = peer.send(peer.headers(stream: 1) + Peer.data(stream: 1, Array(repeating: 1, count: 11)))
        #expect(frames == [Frame(type: Self.rstStream, flags: 0, stream: 1, payload: [0, 0, 0, 3])])

        // The connection window starts at the protocol's 65,535 bytes; a target this small never tops it up.
        let big = Peer(streamWindow: 1 << 20, connectionWindow: 100)
        big.connect()
        var bytes = big.headers(stream: 1)
        for _ in 0..<4 { bytes += Peer.data(stream: 1, Array(repeating: 1, count: 16_384), endStream: false) }
        let out = big.send(bytes)
        #expect(out.last?.type == Self.goAway && out.last?.errorCode == 0x3)
    }

    @Test("a client reset closes the stream; a late answer writes nothing and DATA still in flight is ignored")
    func clientReset() throws {
        let peer = Peer()
        peer.connect()
        peer.send(peer.headers(stream: 1))
        peer.send(Peer.frame(type: 0x3, flags: 0, stream: 1, payload: [0, 0, 0, 8]))
        #expect(peer.recorder.closed == [1])
        peer.answer(1)
        #expect(peer.output().isEmpty)
        #expect(peer.send(Peer.data(stream: 1, [1])).isEmpty)
        #expect(peer.recorder.bodies[1] == nil)
        #expect(!peer.framing.wantsClose)
    }

    @Test("after GOAWAY, new streams are refused and the connection closes once the admitted ones are answered")
    func goAway() throws {
        let peer = Peer()
        peer.connect()
        peer.send(peer.headers(stream: 1, endStream: true) + peer.headers(stream: 3, endStream: true))
        peer.framing.goAway(lastStreamID: 3, debugData: Array("bye".utf8))
        let goAway = peer.output()
        #expect(goAway == [Frame(type: Self.goAway, flags: 0, stream: 0, payload: [0, 0, 0, 3, 0, 0, 0, 0] + Array("bye".utf8))])
        let refused = peer.send(peer.headers(stream: 5, endStream: true))
        #expect(refused == [Frame(type: Self.rstStream, flags: 0, stream: 5, payload: [0, 0, 0, 7])])
        #expect(peer.recorder.opened[5] == nil)
        peer.answer(1)
        #expect(!peer.framing.wantsClose)
        peer.answer(3)
        #expect(peer.framing.wantsClose)
    }

    @Test("an answer sent from a stream-closed callback while flow control holds answers back is sent in full")
    func answerSentWhileAnotherStreamCloses() throws {
        let peer = Peer()
        peer.connect(settings: [(0x4, 10)])  // the client's stream window: 10 bytes
        peer.send(peer.headers(stream: 1, endStream: true) + peer.headers(stream: 3, endStream: true))
        peer.recorder.onClosed = { stream in
            if stream == 1 { peer.answer(3, body: String(repeating: "b", count: 20)) }
        }
        peer.answer(1, body: String(repeating: "a", count: 20))
        #expect(peer.output().filter { $0.type == 0x0 }.map(\.payload.count) == [10])
        // Credit for stream 1: the rest of its answer goes out, it closes, and the callback answers stream 3,
        // which blocks after its first 10 bytes.
        var frames = peer.send(Peer.windowUpdate(stream: 1, 10))
        frames += peer.send(Peer.windowUpdate(stream: 3, 10))
        #expect(frames.filter { $0.type == 0x0 && $0.stream == 3 }.map(\.payload.count).reduce(0, +) == 20)
        #expect(peer.recorder.closed == [1, 3])
    }

    @Test("a frame reader fed reads that each end inside a frame holds only the unread bytes")
    func readerDropsConsumedBytes() throws {
        var reader = HTTP2Wire.FrameReader(allocator: ByteBufferAllocator())
        let frame = Peer.frame(type: 0x0, flags: 0, stream: 1, payload: [UInt8](repeating: 7, count: 1_000))
        let bytes = Array([[UInt8]](repeating: frame, count: 2_000).joined())
        var frames = 0
        var largest = 0
        for start in stride(from: 0, to: bytes.count, by: 1_500) {  // every read ends inside a frame
            reader.append(ByteBuffer(bytes: bytes[start..<min(start + 1_500, bytes.count)]))
            while try reader.next() != nil { frames += 1 }
            largest = max(largest, reader.retainedBytes)
        }
        #expect(frames == 2_000)
        // Without discarding, the buffer would carry all 2 MB read so far.
        #expect(largest < 4 * 1_024, "\(largest) bytes held")
    }
}
