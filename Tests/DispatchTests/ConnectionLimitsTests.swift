import CallContract
import Foundation
import Testing
@testable import DispatchService

/// Below HTTP: a client that stalls, trickles or declares a huge body cannot hold a connection.
@Suite struct ConnectionLimitsTests {
    @Test func aRefusedRequestWithAHugeDeclaredBodyClosesTheConnectionInsteadOfDrainingIt() async throws {
        try await APIHarness.with { h in
            let socket = try RawSocket(port: h.port, receiveTimeout: .milliseconds(200))
            await socket.send("POST /v1/calls HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n")
            await socket.send([UInt8](repeating: 0x20, count: 4_096))
            var answer: [UInt8] = []
            let end = ContinuousClock.now + .seconds(5)
            while ContinuousClock.now < end, !String(decoding: answer, as: UTF8.self).contains("\r\n\r\n") {
                if case .data(let bytes) = await socket.read() { answer += bytes }
            }
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 401"))
            // Keep sending the declared body: a draining server would read it all.
            var sends = 0
            while sends < 50, await socket.send([UInt8](repeating: 0x20, count: 65_536)) { sends += 1 }
            #expect(await socket.waitUntilClosed(within: .seconds(2)), "closed after the 401, not drained")
        }
    }

    @Test func anAckDeclaringMoreThanItsLimitIsRefusedBeforeItsBodyIsRead() async throws {
        try await APIHarness.with { h in
            let socket = try RawSocket(port: h.port, receiveTimeout: .seconds(15))  // returns on the answer; slack for a loaded machine
            await socket.send("POST /v1/calls/\(CallID.make())/ack HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n")
            let read = await socket.read()
            guard case .data(let bytes) = read else {
                Issue.record("no answer before the body was sent: \(read)")
                return
            }
            #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 413"))
        }
    }

    @Test func aConnectionThatNeverFinishesItsRequestHeadIsClosedAfterTheIdleTimeout() async throws {
        var configuration = testConfiguration()
        configuration.idleTimeout = .seconds(1)
        try await APIHarness.with(configuration) { h in
            let sockets = try (0..<20).map { _ in try RawSocket(port: h.port, receiveTimeout: .milliseconds(500)) }
            for socket in sockets { await socket.send("POST /v1/calls/\(CallID.make())/ack HTTP/1.1\r\nHost: x\r\nContent-Len") }
            for socket in sockets { #expect(await socket.waitUntilClosed(within: .seconds(5))) }
        }
    }

    @Test func aBodyThatTricklesIsCutOffAtTheBodyTimeout() async throws {
        var configuration = testConfiguration()
        configuration.bodyTimeout = .seconds(1)
        configuration.idleTimeout = .seconds(30)
        try await APIHarness.with(configuration) { h in
            let socket = try RawSocket(port: h.port, receiveTimeout: .milliseconds(300))
            await socket.send("POST /v1/calls/\(CallID.make())/ack HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
            var answer: [UInt8] = []
            let end = ContinuousClock.now + .seconds(5)
            while ContinuousClock.now < end, !String(decoding: answer, as: UTF8.self).contains("\r\n\r\n") {
                await socket.send("{")  // one byte at a time: the idle timeout alone would never fire
                if case .data(let bytes) = await socket.read() { answer += bytes }
            }
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 408"))
            #expect(await socket.waitUntilClosed(within: .seconds(2)))
        }
    }

    @Test func connectionsBeyondTheCapWaitUntilOneCloses() async throws {
        var configuration = testConfiguration()
        configuration.maxConnections = 2
        try await APIHarness.with(configuration) { h in
            let held = try (0..<2).map { _ in try RawSocket(port: h.port, receiveTimeout: .seconds(3)) }
            for socket in held { await socket.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") }
            for socket in held { #expect(await socket.read() != .timedOut, "the first two are served") }
            let third = try RawSocket(port: h.port, receiveTimeout: .seconds(2))
            await third.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await third.read() == .timedOut, "not served while two connections are open")
            held[0].close()
            #expect(await third.read() != .timedOut, "served once one closed")
        }
    }
}
