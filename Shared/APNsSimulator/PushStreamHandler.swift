import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2

/// One HTTP/2 stream: collects the request (payload bounded), asks the connection for the answer and writes it,
/// after the injected latency if any.
final class PushStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// Bytes of payload kept; anything longer is only counted (it is `PayloadTooLarge` anyway).
    static let maximumKeptBody = RequestValidator.voipPayloadLimit + 1

    private let streamID: Int
    private let connection: APNsConnectionHandler
    private var headers: HPACKHeaders?
    private var body: [UInt8] = []
    private var bodyLength = 0
    private var requestComplete = false

    init(streamID: Int, connection: APNsConnectionHandler) {
        self.streamID = streamID
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !requestComplete else { return }
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if headers == nil { headers = frame.headers }
            if frame.endStream { finish(context: context) }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data {
                bodyLength += buffer.readableBytes
                let room = Self.maximumKeptBody - body.count
                if room > 0 { body.append(contentsOf: buffer.readableBytesView.prefix(room)) }
            }
            if frame.endStream { finish(context: context) }
        default:
            break
        }
    }

    private func finish(context: ChannelHandlerContext) {
        requestComplete = true
        guard let headers else {
            context.close(promise: nil)
            return
        }
        switch connection.decide(headers: headers, body: body, bodyLength: bodyLength, streamID: streamID) {
        case .noResponse:
            break
        case .respond(let answer, let delay):
            body = []
            if delay > 0 {
                _ = context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(delay)) {
                    Self.write(answer, context: context)
                }
            } else {
                Self.write(answer, context: context)
            }
        }
    }

    private static func write(_ answer: PushAnswer, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        var headers = HPACKHeaders()
        headers.reserveCapacity(4)
        headers.add(name: ":status", value: String(answer.status))
        headers.add(name: "apns-id", value: answer.apnsID)
        if let uniqueID = answer.uniqueID { headers.add(name: "apns-unique-id", value: uniqueID) }
        guard let reason = answer.reason else {
            context.writeAndFlush(NIOAny(HTTP2Frame.FramePayload.headers(.init(headers: headers, endStream: true))), promise: nil)
            return
        }
        headers.add(name: "content-type", value: "application/json")
        var json = #"{"reason":""# + jsonEscaped(reason) + "\""
        if let timestamp = answer.timestamp {
            json += #","timestamp":"# + String(Int64(timestamp.timeIntervalSince1970 * 1000))
        }
        json += "}"
        var buffer = context.channel.allocator.buffer(capacity: json.utf8.count)
        buffer.writeString(json)
        context.write(NIOAny(HTTP2Frame.FramePayload.headers(.init(headers: headers))), promise: nil)
        context.writeAndFlush(
            NIOAny(HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil
        )
    }

    private static func jsonEscaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
