import Locking

/// Splits a `text/event-stream` into events (`event:` name, `data:` lines) as chunks arrive.
final class SSELineSplitter: Sendable {
    struct Event: Sendable, Equatable {
        var name: String
        var data: String
    }
    private struct State {
        var buffer: [UInt8] = []
        var name = "message"
        var data: [String] = []
    }
    private let state = Locked(State())

    func feed(_ chunk: [UInt8]) -> [Event] {
        state.withLock { state in
            state.buffer += chunk
            var events: [Event] = []
            while let newline = state.buffer.firstIndex(of: UInt8(ascii: "\n")) {
                var line = String(decoding: state.buffer[..<newline], as: UTF8.self)
                state.buffer.removeSubrange(...newline)
                if line.hasSuffix("\r") { line.removeLast() }
                if line.isEmpty {
                    if !state.data.isEmpty || state.name != "message" {
                        events.append(Event(name: state.name, data: state.data.joined(separator: "\n")))
                    }
                    state.name = "message"
                    state.data = []
                } else if line.hasPrefix("event:") {
                    state.name = line.dropFirst(6).trimmingCharacters(in: .whitespaces)
                } else if line.hasPrefix("data:") {
                    state.data.append(String(line.dropFirst(5).drop { $0 == " " }))
                }
            }
            return events
        }
    }
}
