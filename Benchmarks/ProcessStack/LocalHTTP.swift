import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Plain HTTP/1.1 to the local processes (dispatch, the simulator's admin API, operations
/// endpoints), every request bounded by a timeout.
public struct LocalHTTP: Sendable {
    public struct Response: Sendable {
        public var status: Int
        public var body: Data
    }

    private let session: URLSession

    public init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        configuration.timeoutIntervalForResource = 15
        configuration.httpMaximumConnectionsPerHost = 64
        session = URLSession(configuration: configuration)
    }

    public func send(_ method: String, _ url: String, body: Data? = nil, headers: [String: String] = [:],
              timeout: TimeInterval = 10) async throws -> Response {
        guard let target = URL(string: url) else { throw StackError("bad URL \(url)") }
        var request = URLRequest(url: target, timeoutInterval: timeout)
        request.httpMethod = method
        request.httpBody = body
        if body != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: request)
        return Response(status: (response as? HTTPURLResponse)?.statusCode ?? 0, body: data)
    }

    /// Waits until `url` answers 200, probing every 200 ms, at most `timeout`.
    public func waitUntilOK(_ url: String, timeout: Duration, while alive: () -> Bool = { true }) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard alive() else { throw StackError("process behind \(url) exited during start-up") }
            if let response = try? await send("GET", url, timeout: 2), response.status == 200 { return }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw StackError("\(url) did not answer 200 within \(timeout)")
    }
}

/// A free TCP port on 127.0.0.1 (bound to port 0, read back, closed; the child binds it next).
public func freeLocalPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw StackError("socket() failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw StackError("bind() failed") }
    return Int(UInt16(bigEndian: address.sin_port))
}
