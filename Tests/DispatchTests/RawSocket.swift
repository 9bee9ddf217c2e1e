import Foundation
import Locking
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A blocking TCP client on 127.0.0.1 for tests that must misbehave below HTTP (send half a
/// request, stop reading, trickle a body). Every read is bounded by `SO_RCVTIMEO`, and the
/// blocking calls run on a Dispatch thread: blocking the tests' cooperative threads would starve
/// the in-process server under test.
final class RawSocket: @unchecked Sendable {
    let fd: Int32

    init(port: Int, receiveTimeout: Duration = .seconds(5)) throws {
        #if canImport(Glibc)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
        var timeout = timeval(tv_sec: Int(receiveTimeout.components.seconds), tv_usec: Int(receiveTimeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    private let closed = Locked(false)

    deinit { close() }

    /// Closes the connection (once).
    func close() {
        let wasOpen = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        if wasOpen { Glibc.close(fd) }
    }

    /// Runs a blocking call off the cooperative thread pool.
    private func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: body()) }
        }
    }

    /// Sends everything; false once the peer has closed (EPIPE / ECONNRESET).
    @discardableResult
    func send(_ text: String) async -> Bool { await send(Array(text.utf8)) }

    @discardableResult
    func send(_ bytes: [UInt8]) async -> Bool { await offPool { self.sendBlocking(bytes) } }

    func read(max: Int = 65_536) async -> ReadResult { await offPool { self.readBlocking(max: max) } }

    /// Reads until the peer closes, giving up (false) after `limit`.
    func waitUntilClosed(within limit: Duration) async -> Bool {
        let end = ContinuousClock.now + limit
        while ContinuousClock.now < end {
            switch await read() {
            case .closed: return true
            case .data, .timedOut: continue
            }
        }
        return false
    }

    private func sendBlocking(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    enum ReadResult: Equatable, Sendable {
        case data([UInt8])
        /// The peer closed (or reset) the connection.
        case closed
        /// Nothing within the receive timeout.
        case timedOut
    }

    private func readBlocking(max: Int) -> ReadResult {
        var buffer = [UInt8](repeating: 0, count: max)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, max, 0) }
        if count > 0 { return .data(Array(buffer[0..<count])) }
        if count == 0 { return .closed }
        return errno == EAGAIN || errno == EWOULDBLOCK ? .timedOut : .closed
    }
}
