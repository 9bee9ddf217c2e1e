import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2

/// Frame-level stream handling: requests are collected per stream id in `streams` and answered by writing
/// frames on the connection. Writes made while reading are flushed once at `channelReadComplete`.
extension APNsConnectionHandler {
    /// Bytes of payload kept; anything longer is only counted (it is `PayloadTooLarge` anyway).
    static let maximumKeptBody = RequestValidator.voipPayloadLimit + 1

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inReadLoop = true
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            receiveHeaders(headers, streamID: frame.streamID)
        case .data(let data):
            receiveData(data, streamID: frame.streamID)
        default:
            break  // SETTINGS and PING are acknowledged by NIO; RST_STREAM arrives as StreamClosedEvent.
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        inReadLoop = false
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent {
            streamClosed(closed.streamID)
        } else if let window = event as? NIOHTTP2WindowUpdatedEvent {
            windowChanged(window)
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Requests

    private func receiveHeaders(_ payload: HTTP2Frame.FramePayload.Headers, streamID: HTTP2StreamID) {
        if streamID > lastOpenedStreamID {
            lastOpenedStreamID = streamID
            switch streamOpened(streamID, faults: core.faults) {
            case .process:
                break
            case .refuse:
                write(HTTP2Frame(streamID: streamID, payload: .rstStream(.refusedStream)))
                return
            case .connectionDropped:
                return
            }
        }
        guard let index = streams.index(forKey: streamID), !streams.values[index].requestComplete else { return }
        if streams.values[index].headers == nil { streams.values[index].headers = payload.headers }
        if payload.endStream { requestComplete(streamID, at: index) }
    }

    private func receiveData(_ payload: HTTP2Frame.FramePayload.Data, streamID: HTTP2StreamID) {
        guard let index = streams.index(forKey: streamID), !streams.values[index].requestComplete else { return }
        if case .byteBuffer(let buffer) = payload.data {
            streams.values[index].bodyLength += buffer.readableBytes
            let kept = streams.values[index].body?.readableBytes ?? 0
            let take = min(Self.maximumKeptBody - kept, buffer.readableBytes)
            if take > 0, var slice = buffer.getSlice(at: buffer.readerIndex, length: take) {
                if streams.values[index].body == nil {
                    streams.values[index].body = slice
                } else {
                    streams.values[index].body!.writeBuffer(&slice)
                }
            }
        }
        if payload.endStream { requestComplete(streamID, at: index) }
    }

    private func requestComplete(_ streamID: HTTP2StreamID, at index: Dictionary<HTTP2StreamID, StreamState>.Index) {
        streams.values[index].requestComplete = true
        guard let headers = streams.values[index].headers else {
            write(HTTP2Frame(streamID: streamID, payload: .rstStream(.protocolError)))
            return
        }
        let body = streams.values[index].body
        let bodyLength = streams.values[index].bodyLength
        let faults = streams.values[index].faults
        streams.values[index].body = nil
        switch decide(headers: headers, body: body, bodyLength: bodyLength, streamID: Int(streamID), faults: faults) {
        case .noResponse:
            break
        case .respond(let answer, let delay):
            if delay > 0, let context {
                _ = context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(delay)) {
                    // The client may have reset the stream (timeout) or the connection may be gone.
                    guard self.streams[streamID] != nil else { return }
                    self.write(answer, streamID: streamID)
                }
            } else {
                write(answer, streamID: streamID)
            }
        }
    }

    // MARK: Writing

    private func write(_ answer: PushAnswer, streamID: HTTP2StreamID) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(4)
        headers.add(name: ":status", value: answer.status == 200 ? "200" : String(answer.status))
        headers.add(name: "apns-id", value: answer.apnsID, indexing: .nonIndexable)
        if let uniqueID = answer.uniqueID { headers.add(name: "apns-unique-id", value: uniqueID, indexing: .nonIndexable) }
        guard let reason = answer.reason, let context else {
            write(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true))))
            return
        }
        headers.add(name: "content-type", value: "application/json")
        var json = #"{"reason":""# + Self.jsonEscaped(reason) + "\""
        if let timestamp = answer.timestamp {
            json += #","timestamp":"# + String(Int64(timestamp.timeIntervalSince1970 * 1000))
        }
        json += "}"
        var buffer = context.channel.allocator.buffer(capacity: json.utf8.count)
        buffer.writeString(json)
        write(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers))), flush: false)
        write(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(buffer), endStream: true))))
    }

    /// Writes a frame; flushes now unless inside a read loop (then once at `channelReadComplete`).
    func write(_ frame: HTTP2Frame, flush: Bool = true) {
        guard let context else { return }
        context.write(wrapOutboundOut(frame), promise: nil)
        guard flush else { return }
        if inReadLoop {
            needsFlush = true
        } else {
            context.flush()
        }
    }

    /// Keeps the inbound windows open: when less than half is left, tops the window up to its target.
    /// (Without a stream multiplexer NIO leaves WINDOW_UPDATEs to us.)
    private func windowChanged(_ event: NIOHTTP2WindowUpdatedEvent) {
        guard let inbound = event.inboundWindowSize else { return }
        let target: Int
        if event.streamID == .rootStream {
            target = Self.connectionWindow
        } else {
            // Only streams still receiving their request need credit; closed ones must not get frames.
            guard let state = streams[event.streamID], !state.requestComplete else { return }
            target = Self.streamWindow
        }
        guard inbound < target / 2 else { return }
        write(HTTP2Frame(streamID: event.streamID, payload: .windowUpdate(windowSizeIncrement: target - inbound)))
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
