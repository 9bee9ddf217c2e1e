import APNsSimulator
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Admin HTTP API")
struct AdminAPITests {
    private func call(_ simulator: APNSSimulator, _ method: String, _ path: String, body: String? = nil) async throws -> (Int, Data) {
        let port = try #require(simulator.adminPort)
        var request = URLRequest(url: try #require(URL(string: "http://127.0.0.1:\(port)\(path)")))
        request.httpMethod = method
        request.timeoutInterval = 5
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "content-type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    private func push(_ client: H2TestClient, _ signer: TestSupport.Signer, token: String) async throws -> H2Response {
        try await client.send(path: TestSupport.path(token), headers: TestSupport.voipHeaders(jwt: signer.jwt()), body: TestSupport.payload)
    }

    @Test("GET /admin/pushes lists and filters, DELETE clears, GET /admin/stats counts")
    func pushesAndStats() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer) { simulator async throws in
            try await TestSupport.withClient(simulator) { client async throws in
                #expect(try await push(client, signer, token: TestSupport.token).status == 200)
                #expect(try await push(client, signer, token: TestSupport.otherToken).status == 200)
            }
            let (status, data) = try await call(simulator, "GET", "/admin/pushes")
            #expect(status == 200)
            let all = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
            #expect(all.compactMap { $0["deviceToken"] as? String } == [TestSupport.token, TestSupport.otherToken])
            #expect((all.first?["headers"] as? [String: String])?["apns-push-type"] == "voip")
            #expect(all.first?["payload"] as? String == TestSupport.payload)

            let (_, filteredData) = try await call(simulator, "GET", "/admin/pushes?token=\(TestSupport.otherToken.uppercased())")
            let filtered = try #require(try JSONSerialization.jsonObject(with: filteredData) as? [[String: Any]])
            #expect(filtered.count == 1)

            let (_, futureData) = try await call(simulator, "GET", "/admin/pushes?since=2999-01-01T00:00:00Z")
            #expect((try JSONSerialization.jsonObject(with: futureData) as? [Any])?.isEmpty == true)

            let (statsStatus, statsData) = try await call(simulator, "GET", "/admin/stats")
            #expect(statsStatus == 200)
            let stats = try #require(try JSONSerialization.jsonObject(with: statsData) as? [String: Any])
            #expect(stats["accepted"] as? Int == 2)
            #expect(stats["connectionsOpened"] as? Int == 1)

            let (deleteStatus, _) = try await call(simulator, "DELETE", "/admin/pushes")
            #expect(deleteStatus == 204)
            #expect(simulator.pushes().isEmpty)
        }
    }

    @Test("PUT /admin/faults changes behaviour; invalid faults are refused with 400")
    func putFaults() async throws {
        let signer = TestSupport.Signer()
        try await TestSupport.withSimulator(signer: signer) { simulator async throws in
            let json = #"{"errorRate":{"status":429,"probability":1},"tokenOutcomes":{"\#(TestSupport.otherToken)":{"status":410,"reason":"Unregistered","timestamp":1700000000000}}}"#
            let (status, _) = try await call(simulator, "PUT", "/admin/faults", body: json)
            #expect(status == 200)
            #expect(simulator.faults.errorRate?.status == 429)
            try await TestSupport.withClient(simulator) { client async throws in
                let limited = try await push(client, signer, token: TestSupport.token)
                #expect(limited.status == 429)
                #expect(limited.reason == "TooManyRequests")
                let gone = try await push(client, signer, token: TestSupport.otherToken)
                #expect(gone.status == 410)
                #expect(gone.timestamp == 1_700_000_000_000)
            }
            let (getStatus, getData) = try await call(simulator, "GET", "/admin/faults")
            #expect(getStatus == 200)
            let faults = try #require(try JSONSerialization.jsonObject(with: getData) as? [String: Any])
            #expect((faults["errorRate"] as? [String: Any])?["status"] as? Int == 429)

            let (badStatus, badData) = try await call(simulator, "PUT", "/admin/faults", body: #"{"errorRate":{"status":503,"probability":3}}"#)
            #expect(badStatus == 400)
            #expect(String(decoding: badData, as: UTF8.self).contains("probability"))
            let (badRate, badRateData) = try await call(simulator, "PUT", "/admin/faults", body: #"{"refusedStreamRate":1.5}"#)
            #expect(badRate == 400)
            #expect(String(decoding: badRateData, as: UTF8.self).contains("refusedStreamRate"))
            let (rejectStatus, _) = try await call(simulator, "PUT", "/admin/faults", body: #"{"rejectConnections":"BadCertificateEnvironment","refusedStreamRate":0.25}"#)
            #expect(rejectStatus == 200)
            #expect(simulator.faults.rejectConnections == "BadCertificateEnvironment")
            #expect(simulator.faults.refusedStreamRate == 0.25)
            #expect(simulator.faults.errorRate == nil)  // PUT replaces all faults
            _ = try await call(simulator, "PUT", "/admin/faults", body: json)
            let (garbageStatus, _) = try await call(simulator, "PUT", "/admin/faults", body: "not json")
            #expect(garbageStatus == 400)
            #expect(simulator.faults.errorRate?.status == 429)

            let (clearStatus, _) = try await call(simulator, "PUT", "/admin/faults", body: "{}")
            #expect(clearStatus == 200)
            try await TestSupport.withClient(simulator) { client async throws in
                #expect(try await push(client, signer, token: TestSupport.token).status == 200)
            }
        }
    }

    @Test("GET /admin/ca serves the CA PEM; unknown paths are 404")
    func caAndUnknown() async throws {
        try await TestSupport.withSimulator { simulator async throws in
            let (status, data) = try await call(simulator, "GET", "/admin/ca")
            #expect(status == 200)
            #expect(String(decoding: data, as: UTF8.self) == simulator.caCertificatePEM)
            #expect(simulator.caCertificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
            let (missing, _) = try await call(simulator, "GET", "/admin/nothing")
            #expect(missing == 404)
        }
    }
}
