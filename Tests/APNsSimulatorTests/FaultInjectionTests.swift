import APNsSimulator
import Foundation
import Testing

@Suite("Fault injection")
struct FaultInjectionTests {
    private func push(_ client: H2TestClient, _ signer: TestSupport.Signer, token: String = TestSupport.token) async throws -> H2Response {
        try await client.send(
            path: TestSupport.path(token), headers: TestSupport.voipHeaders(jwt: signer.jwt()), body: TestSupport.payload,
            timeout: .seconds(3)
        )
    }

    @Test("GOAWAY after N streams: N answered, last-stream-id is the Nth stream, later streams not processed")
    func goAwayAfterStreams() async throws {
        let signer = TestSupport.Signer()
        let faults = APNSSimulatorFaults(goAwayAfterStreams: 2, goAwayReason: "Shutdown")
        try await TestSupport.withSimulator(signer: signer, configure: { $0.faults = faults }) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                #expect(try await push(client, signer).status == 200)
                #expect(try await push(client, signer).status == 200)
                let goAway = try #require(client.goAways.first)
                #expect(goAway.lastStreamID == 3)  // client streams 1 and 3
                #expect(goAway.errorCode == .noError)
                #expect(goAway.debugData == #"{"reason":"Shutdown"}"#)
                await #expect(throws: (any Error).self) { try await push(client, signer) }
            }
            #expect(simulator.pushes().count == 2)
            #expect(simulator.stats().goAwaysSent == 1)
            // A new connection works again.
            try await TestSupport.withClient(simulator) { client async throws in
                #expect(try await push(client, signer).status == 200)
            }
        }
    }

    @Test("reject connections: the first stream of each connection gets GOAWAY with last-stream-id 0 and the reason")
    func rejectConnections() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer, configure: { $0.faults.rejectConnections = "BadCertificateEnvironment" }) { simulator async throws in
            for _ in 0..<2 {
                try await TestSupport.withClient(simulator) { client async throws in
                    await #expect(throws: (any Error).self) { try await push(client, signer) }
                    let goAway = try #require(client.goAways.first)
                    #expect(goAway.lastStreamID == 0)
                    #expect(goAway.errorCode == .noError)
                    #expect(goAway.debugData == #"{"reason":"BadCertificateEnvironment"}"#)
                }
            }
            #expect(simulator.pushes().isEmpty)
            #expect(simulator.stats().connectionsRejected == 2)
            simulator.setFaults(APNSSimulatorFaults())
            try await TestSupport.withClient(simulator) { client async throws in
                #expect(try await push(client, signer).status == 200)
            }
        }
    }

    @Test("refused stream rate 1.0 resets every stream with REFUSED_STREAM; 0 answers them")
    func refusedStreams() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer, configure: { $0.faults.refusedStreamRate = 1 }) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                for _ in 0..<3 {
                    await #expect(throws: (any Error).self) { try await push(client, signer) }
                }
                simulator.setFaults(APNSSimulatorFaults())
                #expect(try await push(client, signer).status == 200)
            }
            #expect(simulator.stats().streamsRefused == 3)
            #expect(simulator.pushes().count == 1)
            #expect(simulator.stats().connectionsOpened == 1)
        }
    }

    @Test("drop after N streams: the connection is reset and the next stream gets no answer")
    func dropConnection() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer, configure: { $0.faults.dropConnectionAfterStreams = 1 }) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                #expect(try await push(client, signer).status == 200)
                await #expect(throws: (any Error).self) { try await push(client, signer) }
                #expect(client.goAways.isEmpty)
            }
            #expect(simulator.stats().connectionsDropped == 1)
            #expect(simulator.pushes().count == 1)
        }
    }

    @Test("per-token outcomes: Unregistered with timestamp, BadDeviceToken; other tokens unaffected")
    func tokenOutcomes() async throws {
        let signer = TestSupport.Signer()
        let since = Date(timeIntervalSince1970: 1_790_000_000.123)
        let unregistered = String(repeating: "0f", count: 32)
        let bad = String(repeating: "1e", count: 32)
        try await TestSupport.withSimulator(signer: signer) { simulator async throws in
            simulator.setFaults(APNSSimulatorFaults(tokenOutcomes: [
                unregistered.uppercased(): .unregistered(timestamp: since), bad: .badDeviceToken,
            ]))
            try await TestSupport.withClient(simulator) { client async throws in
                let gone = try await push(client, signer, token: unregistered)
                #expect(gone.status == 410)
                #expect(gone.reason == "Unregistered")
                #expect(gone.timestamp == 1_790_000_000_123)
                let rejected = try await push(client, signer, token: bad)
                #expect(rejected.status == 400)
                #expect(rejected.reason == "BadDeviceToken")
                #expect(try await push(client, signer).status == 200)
            }
            #expect(simulator.pushes().map(\.deviceToken) == [TestSupport.token])
            #expect(simulator.stats().rejected["Unregistered"] == 1)
        }
    }

    @Test("error rate 1.0 answers every push 503 ServiceUnavailable; an ended window answers 200")
    func errorRate() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer) { simulator async throws in
            simulator.setFaults(APNSSimulatorFaults(errorRate: ErrorInjection(status: 503, probability: 1)))
            try await TestSupport.withClient(simulator) { client async throws in
                for _ in 0..<5 {
                    let response = try await push(client, signer)
                    #expect(response.status == 503)
                    #expect(response.reason == "ServiceUnavailable")
                }
                simulator.setFaults(APNSSimulatorFaults(
                    errorRate: ErrorInjection(status: 500, probability: 1, endsAt: Date().addingTimeInterval(-1))
                ))
                #expect(try await push(client, signer).status == 200)
            }
            #expect(simulator.pushes().count == 1)
        }
    }

    @Test("latency delays the answer by at least the configured time")
    func latency() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer, configure: { $0.faults.latency = .fixed(milliseconds: 80) }) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                let start = ContinuousClock.now
                #expect(try await push(client, signer).status == 200)
                #expect(ContinuousClock.now - start >= .milliseconds(80))
            }
        }
    }

    @Test("no-response tokens are never answered while others are")
    func noResponse() async throws {
        let signer = TestSupport.Signer()
        let silent = String(repeating: "5a", count: 32)
        try await TestSupport.withSimulator(signer: signer, configure: { $0.faults.tokenOutcomes = [silent: .noResponse] }) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                await #expect(throws: (any Error).self) {
                    try await client.send(
                        path: TestSupport.path(silent), headers: TestSupport.voipHeaders(jwt: signer.jwt()),
                        body: TestSupport.payload, timeout: .milliseconds(300)
                    )
                }
                #expect(try await push(client, signer).status == 200)
                simulator.setFaults(APNSSimulatorFaults(noResponse: true))
                await #expect(throws: (any Error).self) {
                    try await client.send(
                        path: TestSupport.path(), headers: TestSupport.voipHeaders(jwt: signer.jwt()),
                        body: TestSupport.payload, timeout: .milliseconds(300)
                    )
                }
            }
            #expect(simulator.stats().unanswered == 2)
        }
    }

    @Test("maxConcurrentStreams set at run time reaches open connections")
    func maxConcurrentStreamsAtRunTime() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                #expect(try await push(client, signer).status == 200)
                #expect(client.maxConcurrentStreams == 1000)
                simulator.setFaults(APNSSimulatorFaults(maxConcurrentStreams: 7))
                #expect(try await push(client, signer).status == 200)
                #expect(client.maxConcurrentStreams == 7)
            }
        }
    }
}
