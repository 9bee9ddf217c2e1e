import CallpushTestSupport
import HTTP2Wire
import NIOCore
import NIOHPACK
import Testing

/// Whatever bytes a peer sends, an ``HTTP2Connection`` answers with frames or a GOAWAY and never traps: valid
/// exchanges mutated at random (bit flips, cut, repeated or shuffled frames, random lengths) and plain noise,
/// cut into random read sizes. Seeded, so a failure reproduces.
@Suite("HTTP/2 connection under random input")
struct HTTP2RandomInputTests {
    final class Answering: HTTP2ConnectionDelegate {
        weak var connection: HTTP2Connection?
        var closedStreams = 0

        func http2StreamOpened(_ stream: UInt32, headers: HPACKHeaders) -> HTTP2Admission { stream % 7 == 0 ? .refuse : .accept }
        func http2Data(_ data: ByteBuffer, stream: UInt32) {}
        func http2RemoteEnded(_ stream: UInt32) {
            connection?.send(stream: stream, headers: [(":status", "200"), ("apns-id", "x")], body: stream % 3 == 0 ? ByteBuffer(string: "{}") : nil)
        }
        func http2StreamClosed(_ stream: UInt32, _ end: HTTP2StreamEnd) { closedStreams += 1 }
    }

    /// A plausible byte stream from a peer: frames of every type with mostly valid, sometimes odd fields.
    static func plausibleFrames(using random: inout SplitMix) -> [UInt8] {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var bytes = HTTP2Wire.clientPreface
        bytes += HTTP2ServerRoleTests.Peer.frame(type: 0x4, flags: 0, stream: 0, payload: HTTP2ServerRoleTests.Peer.settingsPayload([(0x4, 100), (0x1, 0)]))
        for _ in 0..<Int.random(in: 1...12, using: &random) {
            let stream = UInt32.random(in: 0...9, using: &random) | (Bool.random(using: &random) ? 1 : 0)
            switch Int.random(in: 0..<9, using: &random) {
            case 0, 1:
                let headers: [(String, String)] = [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/ab"), ("apns-topic", "t")]
                var block = ByteBuffer()
                try? encoder.encode(headers: HPACKHeaders(headers), to: &block)
                let flags = UInt8.random(in: 0...0x2d, using: &random) | 0x4
                var payload = Array(block.readableBytesView)
                if flags & 0x20 != 0 { payload = [0, 0, 0, 1, 16] + payload }
                if flags & 0x8 != 0 { payload = [2] + payload + [0, 0] }
                bytes += HTTP2ServerRoleTests.Peer.frame(type: 0x1, flags: flags, stream: stream, payload: payload)
            case 2:
                bytes += HTTP2ServerRoleTests.Peer.data(stream: stream, (0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }, endStream: Bool.random(using: &random))
            case 3:
                bytes += HTTP2ServerRoleTests.Peer.windowUpdate(stream: stream, UInt32.random(in: 0...0x8000_0000, using: &random))
            case 4:
                bytes += HTTP2ServerRoleTests.Peer.frame(type: 0x3, flags: 0, stream: stream, payload: [0, 0, 0, UInt8.random(in: 0...14, using: &random)])
            case 5:
                bytes += HTTP2ServerRoleTests.Peer.frame(type: 0x6, flags: UInt8.random(in: 0...1, using: &random), stream: 0, payload: [1, 2, 3, 4, 5, 6, 7, 8])
            case 6:
                bytes += HTTP2ServerRoleTests.Peer.frame(type: 0x4, flags: UInt8.random(in: 0...1, using: &random), stream: 0, payload: HTTP2ServerRoleTests.Peer.settingsPayload([
                    (UInt16.random(in: 1...7, using: &random), UInt32.random(in: 0...0x9000_0000, using: &random)),
                ]))
            case 7:
                bytes += HTTP2ServerRoleTests.Peer.frame(type: 0x7, flags: 0, stream: 0, payload: [0, 0, 0, UInt8.random(in: 0...9, using: &random), 0, 0, 0, 0])
            default:
                bytes += HTTP2ServerRoleTests.Peer.frame(
                    type: UInt8.random(in: 0...12, using: &random), flags: UInt8.random(in: 0...255, using: &random), stream: stream,
                    payload: (0..<Int.random(in: 0...12, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
            }
        }
        return bytes
    }

    static func mutate(_ bytes: [UInt8], using random: inout SplitMix) -> [UInt8] {
        var bytes = bytes
        for _ in 0..<Int.random(in: 0...4, using: &random) where !bytes.isEmpty {
            let index = Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<4, using: &random) {
            case 0: bytes[index] ^= UInt8(1) << UInt8.random(in: 0...7, using: &random)
            case 1: bytes[index] = UInt8.random(in: 0...255, using: &random)
            case 2: bytes.removeSubrange(index...)
            default: bytes.insert(contentsOf: bytes[index...].prefix(20), at: index)
            }
        }
        return bytes
    }

    @Test("8,000 random and mutated inputs: no trap, and a closed connection stays closed")
    func randomInput() throws {
        var random = SplitMix(state: 0x5eed)
        var closedByError = 0
        for round in 0..<8_000 {
            let delegate = Answering()
            let connection = HTTP2Connection(
                allocator: ByteBufferAllocator(), settings: [(.maxConcurrentStreams, 4)],
                streamWindow: Int.random(in: 10...70_000, using: &random), connectionWindow: 1 << 16, maxHeaderListSize: 1024
            )
            connection.delegate = delegate
            delegate.connection = connection
            var bytes = round % 5 == 4
                ? (0..<Int.random(in: 0...200, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                : Self.plausibleFrames(using: &random)
            bytes = Self.mutate(bytes, using: &random)
            var offset = 0
            while offset < bytes.count {
                let size = min(bytes.count - offset, Int.random(in: 1...64, using: &random))
                connection.receive(ByteBuffer(bytes: bytes[offset..<offset + size]))
                offset += size
            }
            _ = connection.takeOutput()
            if connection.wantsClose, connection.lastError != nil {
                closedByError += 1
                #expect(connection.openStreamCount == 0, "round \(round): streams left after a connection error")
                connection.receive(ByteBuffer(bytes: HTTP2ServerRoleTests.Peer.data(stream: 1, [1])))
                #expect(connection.takeOutput() == nil, "round \(round): output after a connection error")
            }
        }
        // The generator must reach the error paths, not only the happy one.
        #expect(closedByError > 500)
    }
}
