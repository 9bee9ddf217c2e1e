import Foundation
import HTTP2Wire
import NIOCore
import NIOHPACK

/// Stream handling: ``HTTP2Connection`` parses the client's bytes and calls back for each request; answers go
/// into its output buffer, written once per read burst (at `channelReadComplete`) or at once outside of one.
extension SimulatorConnectionHandler: HTTP2ConnectionDelegate {
    /// Bytes of payload kept; anything longer is only counted (it is `PayloadTooLarge` anyway).
    static let maximumKeptBody = RequestValidator.voipPayloadLimit + 1

    /// Writes what the framing produced; closes the connection once it is written if the framing is done
    /// (GOAWAY with no stream left, or a protocol error).
    func flushOutput() {
        commitRecords()
        guard let context, !closing else { return }
        if framing.wantsClose, let error = framing.lastError {
            core.logger.debug(
                "HTTP/2 connection error", metadata: ["apns.connection": "\(id)", "error": "\(error.code) \(error.detail)"]
            )
        }
        closing = framing.writeOutput(to: context)
    }

    // MARK: HTTP2ConnectionDelegate

    func http2StreamOpened(_ stream: UInt32, headers: HPACKHeaders) -> HTTP2Admission {
        let admission = streamOpened(stream, faults: currentFaults())
        if case .accept = admission { streams[stream]?.headers = headers }
        return admission
    }

    func http2Data(_ buffer: ByteBuffer, stream: UInt32) {
        guard let index = streams.index(forKey: stream), !streams.values[index].requestComplete else { return }
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

    func http2RemoteEnded(_ stream: UInt32) {
        guard let index = streams.index(forKey: stream), !streams.values[index].requestComplete else { return }
        streams.values[index].requestComplete = true
        guard let headers = streams.values[index].headers else { return }
        let body = streams.values[index].body
        let bodyLength = streams.values[index].bodyLength
        let faults = streams.values[index].faults
        streams.values[index].body = nil
        switch decide(headers: headers, body: body, bodyLength: bodyLength, streamID: Int(stream), faults: faults) {
        case .noResponse:
            break
        case .respond(let answer, let delay):
            framing.answer(stream: stream, after: .nanoseconds(delay), context: context) { self.write(answer, stream: stream) }
        }
    }

    func http2StreamClosed(_ stream: UInt32, _ end: HTTP2StreamEnd) {
        streams.removeValue(forKey: stream)
    }

    // MARK: Writing

    private func write(_ answer: PushAnswer, stream: UInt32) {
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(4)
        headers.append((":status", answer.status == 200 ? "200" : String(answer.status)))
        headers.append(("apns-id", answer.apnsID))
        if let uniqueID = answer.uniqueID { headers.append(("apns-unique-id", uniqueID)) }
        var body: ByteBuffer?
        if let reason = answer.reason {
            headers.append(("content-type", "application/json"))
            var json = #"{"reason":""# + Self.jsonEscaped(reason) + "\""
            if let timestamp = answer.timestamp {
                json += #","timestamp":"# + String(Int64(timestamp.timeIntervalSince1970 * 1000))
            }
            json += "}"
            body = ByteBuffer(string: json)
        }
        framing.send(stream: stream, headers: headers, body: body)
        if !inReadLoop { flushOutput() }
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
