import Foundation
import Synchronization

/// Collects a child's stdout and wakes a waiter when a line containing a marker appears.
final class LineWaiter: Sendable {
    private let state = Mutex<(text: String, waiter: (marker: String, continuation: CheckedContinuation<String, any Error>)?)>(("", nil))

    func append(_ data: Data) {
        let resume: (CheckedContinuation<String, any Error>, String)? = state.withLock { state in
            state.text += String(decoding: data, as: UTF8.self)
            guard let waiter = state.waiter, let line = Self.line(in: state.text, containing: waiter.marker) else { return nil }
            state.waiter = nil
            return (waiter.continuation, line)
        }
        if let (continuation, line) = resume { continuation.resume(returning: line) }
    }

    func waitFor(_ marker: String, timeout: Duration) async throws -> String {
        let timer = Task {
            try await Task.sleep(for: timeout)
            self.fail(H2TestClientError(description: "no line containing '\(marker)' within \(timeout)"))
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let line: String? = state.withLock { state in
                if let line = Self.line(in: state.text, containing: marker) { return line }
                state.waiter = (marker, continuation)
                return nil
            }
            if let line { continuation.resume(returning: line) }
        }
    }

    private func fail(_ error: any Error) {
        let continuation = state.withLock { state -> CheckedContinuation<String, any Error>? in
            defer { state.waiter = nil }
            return state.waiter?.continuation
        }
        continuation?.resume(throwing: error)
    }

    private static func line(in text: String, containing marker: String) -> String? {
        text.split(separator: "\n").first { $0.contains(marker) }.map(String.init)
    }
}

/// Waits for a process exit with a timeout.
final class ExitWaiter: Sendable {
    private let state = Mutex<(status: Int32?, continuation: CheckedContinuation<Int32, any Error>?)>((nil, nil))

    func finish(_ status: Int32) {
        let continuation = state.withLock { state -> CheckedContinuation<Int32, any Error>? in
            state.status = status
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: status)
    }

    func wait(timeout: Duration) async throws -> Int32 {
        let timer = Task {
            try await Task.sleep(for: timeout)
            let continuation = self.state.withLock { state -> CheckedContinuation<Int32, any Error>? in
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume(throwing: H2TestClientError(description: "process did not exit within \(timeout)"))
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let status: Int32? = state.withLock { state in
                if let status = state.status { return status }
                state.continuation = continuation
                return nil
            }
            if let status { continuation.resume(returning: status) }
        }
    }
}
